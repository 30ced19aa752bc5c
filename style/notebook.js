// The notebook's cells (lab/src/notebook/): after every shell block of a
// chapter whose first command runs a case (`./run.sh F4 --mode unfenced`),
// a cell that runs it here when the book is served by `./run.sh serve`:
// its parameters as controls, Run and Stop, the transcript as it streams
// in, then the verdict, the diff against the locked snapshot and the run's
// history pages. Read from a file or a plain web server (no lab behind
// it), the cell says how to run the command instead.
(function () {
  "use strict";
  // The notebook's pages live under /<token>/: the token is the first part
  // of this page's own path, and every call carries it.
  var m = window.location.pathname.match(/^\/([0-9a-f]{32})\//);
  var base = m && window.location.protocol === "http:" ? "/" + m[1] + "/api/" : null;
  var blocks = [];
  // One cell per case a block runs (for its first command of that case),
  // and one per other command the notebook runs: a short chaos run, the
  // model's table, a `try` exercise, a small bench.
  document.querySelectorAll("pre > code.language-sh, pre > code.language-bash").forEach(function (code) {
    var seen = {};
    code.textContent.split("\n").map(function (l) { return l.trim(); }).forEach(function (l) {
      var m = l.match(/^\.\/run\.sh (F\d+|chaos|model|try|bench)\b/);
      if (!m) return;
      // The model's table only (not --explore, --replay, --mutants).
      if (m[1] === "model" && !/^\.\/run\.sh model( --out \S+)?$/.test(l)) return;
      if (m[1] === "try" && !/^\.\/run\.sh try [a-z0-9-]+$/.test(l)) return;
      if (m[1] === "bench" && /--redraw/.test(l)) return;
      var key = m[1] === "try" ? l : m[1];
      if (seen[key]) return;
      seen[key] = true;
      blocks.push({ pre: code.parentElement, command: l });
    });
  });
  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  // What a command line asks, as the notebook's `api/run` takes it.
  function parse(command) {
    var words = command.split(/\s+/), what = words[1];
    var asked = /^F\d+$/.test(what) ? { case: what, mode: null, pause_before_check: false } : { command: what };
    for (var i = 2; i < words.length; i++) {
      if (words[i] === "--mode") asked.mode = words[++i];
      else if (words[i] === "--threads") asked.threads = +words[++i];
      else if (words[i] === "--pause-before-check") asked.pause_before_check = true;
      else if (words[i] === "--seed") asked.seed = +words[++i];
      else if (words[i] === "--duration") asked.duration_s = parseInt(words[++i], 10);
      else if (what === "try" && i === 2) asked.name = words[i];
    }
    return asked;
  }

  // The command line a request runs, as a reader would type it.
  function commandLine(w, info) {
    if (w.case) return "./run.sh " + w.case + (w.mode && w.mode !== info.mode ? " --mode " + w.mode : "") + (w.pause_before_check ? " --pause-before-check" : "") + (w.threads ? " --threads " + w.threads : "");
    if (w.command === "chaos") return "./run.sh chaos --seed " + w.seed + " --duration " + w.duration_s + "s --mode " + w.mode;
    if (w.command === "try") return "./run.sh try " + w.name;
    if (w.command === "bench") return "./run.sh bench --seconds 1 --runs 1 --writers 1,16 --scopes 1,1000 --out target/lab/bench-notebook.md";
    return "./run.sh model";
  }

  // After the block, and after the cells already placed under it.
  function place(block, cell) {
    (block.last || block.pre).after(cell);
    blocks.forEach(function (b) { if (b.pre === block.pre) b.last = cell; });
  }

  function lineClass(line) {
    if (/^\s*ok\b/.test(line)) return "lab-ok";
    if (/^\s*note\b/.test(line)) return "lab-note";
    if (/^\s*FAIL\b/.test(line)) return "lab-fail";
    if (/^CASE\b|^SUMMARY\b/.test(line)) return "lab-head";
    // A `try` run's diff against the good transcript.
    if (/^\+\s*FAIL\b/.test(line)) return "lab-fail";
    if (/^\+(?!\+\+ )/.test(line)) return "lab-add";
    if (/^-(?!-- )/.test(line)) return "lab-del";
    return "";
  }

  function build(block, api) {
    var asked = parse(block.command);
    var info = asked.case ? api && api.cases.find(function (c) { return c.id === asked.case; }) : { id: asked.command, mode: null, modes: [], pause_before_check: false };
    var cell = el("div", "lab-cell");
    cell.appendChild(el("div", "lab-cell-title", "在这里运行 " + (asked.case || block.command)));
    if (!base || !info) {
      cell.appendChild(el("p", "lab-cell-static", base ? "这个服务器不认识 " + asked.case + "。" : "在终端里运行上面的命令；用 ./run.sh serve 打开这本书，就能在这一页上直接运行它。"));
      place(block, cell);
      return;
    }
    var controls = el("div", "lab-cell-controls");
    var mode = null, pause = null, seed = null, duration = null, threads = null;
    if (asked.command === "chaos") {
      seed = el("input");
      seed.type = "number"; seed.min = "0"; seed.value = String(asked.seed || 1);
      var sl = el("label", null, "种子 ");
      sl.appendChild(seed);
      controls.appendChild(sl);
      duration = el("select");
      [5, 10, 20, api.chaos_max_s].forEach(function (n) {
        var o = el("option", null, n + " s");
        o.value = String(n);
        duration.appendChild(o);
      });
      duration.value = String(Math.min(asked.duration_s || 10, api.chaos_max_s));
      var dl = el("label", null, "每种模式 ");
      dl.appendChild(duration);
      controls.appendChild(dl);
      info.modes = ["all"].concat(api.modes);
      info.mode = asked.mode || "all";
    }
    if (info.modes.length) {
      mode = el("select");
      info.modes.forEach(function (name) {
        var o = el("option", null, name);
        o.value = name;
        if (name === (asked.mode || info.mode)) o.selected = true;
        mode.appendChild(o);
      });
      var label = el("label", null, "资源端模式 ");
      label.appendChild(mode);
      controls.appendChild(label);
    }
    if (info.pause_before_check) {
      pause = el("input");
      pause.type = "checkbox";
      pause.checked = asked.pause_before_check;
      var pl = el("label");
      pl.appendChild(pause);
      pl.appendChild(document.createTextNode(" --pause-before-check"));
      controls.appendChild(pl);
    }
    if (info.threads) {
      threads = el("input");
      threads.type = "number"; threads.min = "2"; threads.max = String(api.max_threads); threads.value = String(asked.threads || api.threads);
      var tl = el("label", null, "线程数 ");
      tl.appendChild(threads);
      controls.appendChild(tl);
    }
    var predict = null;
    if (asked.case && info.modes.length) {
      predict = el("select");
      ["先预测：迟到的旧写入会被接受吗？", "会被接受", "会被拒绝"].forEach(function (t, i) {
        var o = el("option", null, t);
        o.value = String(i);
        predict.appendChild(o);
      });
      controls.appendChild(predict);
    }
    var run = el("button", "lab-run", "运行");
    // Stop ends whatever run is under way, even one started before this
    // page was loaded.
    var stop = el("button", "lab-stop", "停止");
    controls.appendChild(run);
    controls.appendChild(stop);
    cell.appendChild(controls);
    var command = el("code", "lab-command");
    cell.appendChild(command);
    var out = el("pre", "lab-out");
    var verdict = el("div", "lab-verdict");
    cell.appendChild(out);
    cell.appendChild(verdict);
    place(block, cell);

    function wanted() {
      if (asked.case) {
        var w = { case: info.id, mode: mode ? mode.value : null, pause_before_check: pause ? pause.checked : false };
        if (threads && +threads.value !== api.threads) w.threads = +threads.value;
        return w;
      }
      if (asked.command === "chaos") return { command: "chaos", seed: +seed.value || 0, duration_s: +duration.value, mode: mode.value };
      if (asked.command === "try") return { command: "try", name: asked.name };
      return { command: asked.command };
    }
    function show() {
      command.textContent = commandLine(wanted(), info);
    }
    [mode, pause, seed, duration, threads].forEach(function (c) { if (c) c.addEventListener("change", show); });
    show();

    function finish(result) {
      verdict.textContent = "";
      // A `try` exercise succeeds when the broken guard is caught: its case
      // fails, and the broken run is the locked one.
      var status = asked.command === "try"
        ? (result.status === 0 ? "补丁被用例抓住，这次的坏运行记录与锁定的一致（退出码 0）" : "补丁没有被抓住、坏运行记录与锁定的不同，或运行出错（退出码 " + result.status + "，见上面的输出）")
        : (result.status === 0 ? "通过（退出码 0）" : "有 FAIL 或出错（退出码 " + result.status + "）");
      verdict.appendChild(el("div", result.status === 0 ? "lab-ok" : "lab-fail", "结果：" + status));
      if (predict && predict.value !== "0") {
        verdict.appendChild(el("div", "lab-note", "你预测：" + predict.options[predict.selectedIndex].text + "。对照上面的运行记录看它说了什么。"));
      }
      if (result.diff === null) {
        if (asked.case) verdict.appendChild(el("div", "lab-note", "没有可比较的锁定证据（" + (result.snapshot || result.run) + "），或这次运行没有跑完用例。"));
      } else if (result.diff === "") {
        verdict.appendChild(el("div", "lab-ok", "与锁定的证据 " + result.snapshot + " 一致（已按规则换掉每次都会变的值）"));
      } else {
        verdict.appendChild(el("div", "lab-fail", "与锁定的证据 " + result.snapshot + " 不同："));
        var d = el("pre", "lab-diff");
        result.diff.split("\n").forEach(function (line) {
          d.appendChild(el("span", line[0] === "+" ? "lab-add" : line[0] === "-" ? "lab-del" : "", line + "\n"));
        });
        verdict.appendChild(d);
      }
      (result.histories || []).forEach(function (page) {
        var a = el("a", null, "历史页面 " + page);
        a.href = base + "history/" + encodeURIComponent(page);
        a.target = "_blank";
        verdict.appendChild(a);
        verdict.appendChild(document.createTextNode(" "));
      });
    }

    run.addEventListener("click", function () {
      out.textContent = "";
      verdict.textContent = "";
      run.disabled = true;
      fetch(base + "run", { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify(wanted()) })
        .then(function (res) {
          if (!res.ok) return res.text().then(function (t) { throw new Error(t); });
          var reader = res.body.getReader(), decoder = new TextDecoder(), rest = "";
          function pump() {
            return reader.read().then(function (part) {
              rest += decoder.decode(part.value || new Uint8Array(), { stream: !part.done });
              var lines = rest.split("\n");
              rest = lines.pop();
              lines.forEach(function (line) {
                if (line.indexOf("@@result ") === 0) return finish(JSON.parse(line.slice(9)));
                // What the run says on stderr: its progress and its errors.
                // (its errors, `lab: …`, as failures).
                if (line.indexOf("@@stderr ") === 0) return out.appendChild(el("span", /^lab: /.test(line.slice(9)) ? "lab-fail" : "lab-stderr", line.slice(9) + "\n"));
                out.appendChild(el("span", lineClass(line), line + "\n"));
              });
              out.scrollTop = out.scrollHeight;
              if (!part.done) return pump();
            });
          }
          return pump();
        })
        .catch(function (e) { verdict.appendChild(el("div", "lab-fail", String(e.message || e))); })
        .then(function () { run.disabled = false; });
    });
    stop.addEventListener("click", function () {
      fetch(base + "stop", { method: "POST" }).then(function (r) { return r.text(); }).then(function (t) { verdict.appendChild(el("div", "lab-note", t)); });
    });
  }

  function all(api) { blocks.forEach(function (b) { build(b, api); }); }
  if (!base) return all(null);
  fetch(base + "cases").then(function (r) { return r.json(); }).then(all, function () { base = null; all(null); });
})();
