// The visual checks of one page of the book, run inside the page by
// lab/tests/visual.rs (which evaluates `(this function)(options)`): what a
// reader sees, measured on the page as Chromium drew it. It returns a plain
// object: the counts of what it looked at and the problems it found, each a
// sentence naming the page's element.
//
// options: { theme, dark, checks: ["theme", "width", "glyphs", "contrast"],
// open: false to leave closed <details> closed (a screenshot) }
async (options) => {
  const out = { problems: [], counts: { glyphs: 0, diagrams: 0, texts: 0, marks: 0, tofu: 0 }, lowest: null };
  const problem = (text) => out.problems.push(text);
  const wants = (check) => options.checks.includes(check);

  // The page must be drawn before it is judged: the load event has fired
  // (the caller waited for it); mermaid draws its diagrams after that and
  // marks each source block it replaced with data-processed.
  const deadline = Date.now() + 20000;
  while (document.querySelector("pre.mermaid:not([data-processed])")) {
    if (Date.now() > deadline) {
      problem("mermaid did not draw every diagram within 20 s");
      break;
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  await document.fonts.ready;
  // A closed <details> (an exercise's answer) is part of the page: open it,
  // so that what it holds is laid out and measured too.
  if (options.open !== false) for (const d of document.querySelectorAll("details")) d.open = true;

  const main = document.querySelector("main");
  if (!main || main.innerText.trim().length === 0) {
    problem("the page has no text in <main>");
    return out;
  }

  // Colours -----------------------------------------------------------------

  // A computed colour ("rgb(1, 2, 3)", "rgba(1, 2, 3, 0.5)", "transparent",
  // "none") as [r, g, b, a], or null when it is no plain colour.
  const parse = (text) => {
    if (!text || text === "none" || text === "transparent") return [0, 0, 0, 0];
    const m = text.match(/^rgba?\(\s*([\d.]+)[,\s]+([\d.]+)[,\s]+([\d.]+)(?:\s*[,/]\s*([\d.]+%?))?\s*\)$/);
    if (!m) return null;
    let a = m[4] === undefined ? 1 : parseFloat(m[4]);
    if (m[4] && m[4].endsWith("%")) a /= 100;
    return [parseFloat(m[1]), parseFloat(m[2]), parseFloat(m[3]), a];
  };
  // `top` with its alpha drawn over the opaque `bottom`.
  const over = (top, bottom) => [0, 1, 2].map((i) => top[i] * top[3] + bottom[i] * (1 - top[3])).concat([1]);
  const luminance = (c) => {
    const lin = (v) => ((v /= 255) <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4));
    return 0.2126 * lin(c[0]) + 0.7152 * lin(c[1]) + 0.0722 * lin(c[2]);
  };
  // The WCAG 2 contrast ratio of two opaque colours.
  const ratio = (a, b) => {
    const [x, y] = [luminance(a), luminance(b)].sort((p, q) => q - p);
    return (x + 0.05) / (y + 0.05);
  };
  const shown = (c) => "#" + c.slice(0, 3).map((v) => Math.round(v).toString(16).padStart(2, "0")).join("");
  // CIE L*a*b* of an sRGB colour, for telling two series' colours apart.
  const lab = (c) => {
    const lin = (v) => ((v /= 255) <= 0.04045 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4));
    const [r, g, b] = c.slice(0, 3).map(lin);
    const xyz = [(0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b, (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883];
    const f = (t) => (t > 216 / 24389 ? Math.cbrt(t) : (24389 / 27 * t + 16) / 116);
    const [fx, fy, fz] = xyz.map(f);
    return [116 * fy - 16, 500 * (fx - fy), 200 * (fy - fz)];
  };
  const distance = (a, b) => Math.hypot(...lab(a).map((v, i) => v - lab(b)[i]));

  // The opaque colour behind an element, from its ancestors' backgrounds
  // (the browser's canvas, white, under all of them).
  const backdrop = (el) => {
    const layers = [];
    for (let e = el; e; e = e.parentElement) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) layers.push(c);
      if (c && c[3] >= 1) break;
    }
    return layers.reverse().reduce((below, c) => over(c, below), [255, 255, 255, 1]);
  };
  // The product of the opacities of an element and its ancestors.
  const opacity = (el) => {
    let o = 1;
    for (let e = el; e; e = e.parentElement) o *= parseFloat(getComputedStyle(e).opacity);
    return o;
  };

  // 1. The theme switch happened ----------------------------------------------
  const page = backdrop(document.body);
  if (wants("theme")) {
    const html = document.documentElement;
    if (!html.classList.contains(options.theme)) problem(`the theme did not switch to ${options.theme}: <html class="${html.className}">`);
    const dark = luminance(page) < 0.2;
    if (dark !== options.dark) problem(`the page's background ${shown(page)} is ${dark ? "dark" : "light"}, but ${options.theme} is a ${options.dark ? "dark" : "light"} theme`);
    if (window.mermaid) {
      const drawn = window.mermaid.mermaidAPI.getConfig().theme;
      const expected = options.dark ? "dark" : "default";
      if (drawn !== expected) problem(`mermaid drew its diagrams in its ${drawn} theme, not ${expected}, under ${options.theme}`);
    } else if (document.querySelector("pre.mermaid")) {
      problem("mermaid is not loaded, and the page has diagrams");
    }
  }

  // A short name of an element, for a problem's sentence.
  const describe = (el) => {
    let name = el.tagName.toLowerCase();
    if (el.id) name += "#" + el.id;
    else if (el.classList.length) name += "." + [...el.classList].slice(0, 2).join(".");
    const text = (el.textContent || "").trim().replace(/\s+/g, " ").slice(0, 40);
    return text ? `${name} «${text}»` : name;
  };

  // 2. Nothing wider than the column, unless it scrolls in a box of its own -
  if (wants("width")) {
    const column = main.getBoundingClientRect();
    const fits = (r) => r.left >= column.left - 1 && r.right <= column.right + 1;
    const scrolls = (el) => ["auto", "scroll"].includes(getComputedStyle(el).overflowX);
    const reported = new Set();
    for (const el of main.querySelectorAll("*")) {
      // An SVG's inside is clipped to the SVG, which is measured itself.
      if (el.ownerSVGElement) continue;
      const r = el.getBoundingClientRect();
      if ((r.width === 0 && r.height === 0) || fits(r)) continue;
      let boxed = false;
      let outer = null;
      for (let a = el.parentElement; a && a !== main; a = a.parentElement) {
        if (reported.has(a)) outer = a;
        if (!boxed && scrolls(a)) boxed = fits(a.getBoundingClientRect());
      }
      if (boxed || outer) continue;
      reported.add(el);
      problem(`${describe(el)} is ${Math.round(r.width)} px wide, reaching ${Math.round(r.left - column.left)}…${Math.round(r.right - column.left)} px of a ${Math.round(column.width)} px column, and scrolls in no box of its own`);
    }
    out.counts.elements = main.querySelectorAll("*").length;
  }

  // 3. Every Chinese glyph drawn with a font that has it ---------------------
  // A character no font covers is drawn as the font's empty box (.notdef):
  // every missing character the same box. So each Chinese character of the
  // page is drawn on a canvas, in the font of the element that holds it, and
  // compared with a character no font has (U+10FFFD, private use): the
  // same pixels mean the character was drawn as that box.
  if (wants("glyphs")) {
    const cjk = /[\p{Script=Han}\u3001-\u303f\uff01-\uffee]/u;
    const byFont = new Map();
    const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    while (walker.nextNode()) {
      const node = walker.currentNode;
      const el = node.parentElement;
      if (!el || el.closest("script, style, noscript, template, title")) continue;
      const chars = [...node.data].filter((c) => cjk.test(c));
      if (chars.length === 0) continue;
      const s = getComputedStyle(el);
      const font = `${s.fontStyle} ${s.fontWeight} 40px ${s.fontFamily}`;
      if (!byFont.has(font)) byFont.set(font, new Map());
      const seen = byFont.get(font);
      for (const c of chars) if (!seen.has(c)) seen.set(c, el);
    }
    const canvas = document.createElement("canvas");
    canvas.width = canvas.height = 64;
    const ctx = canvas.getContext("2d", { willReadFrequently: true });
    const draw = (font, c) => {
      ctx.clearRect(0, 0, 64, 64);
      ctx.font = font;
      ctx.fillStyle = "#000";
      ctx.textBaseline = "middle";
      ctx.fillText(c, 8, 32);
      const pixels = ctx.getImageData(0, 0, 64, 64).data;
      let alpha = "";
      for (let i = 3; i < pixels.length; i += 4) alpha += pixels[i] > 127 ? "1" : "0";
      return ctx.measureText(c).width.toFixed(2) + ":" + alpha;
    };
    const boxes = [];
    for (const [font, chars] of byFont) {
      const box = draw(font, "\u{10FFFD}");
      for (const [c, el] of chars) {
        out.counts.glyphs += 1;
        if (draw(font, c) === box) boxes.push([c, font, el]);
      }
    }
    out.counts.tofu = boxes.length;
    if (boxes.length) {
      const fonts = [...new Set(boxes.map((b) => b[1].replace(/^\S+ \S+ 40px /, "")))];
      problem(`${boxes.length} of ${out.counts.glyphs} Chinese characters are drawn as empty boxes (no font has them), e.g. «${boxes.slice(0, 12).map((b) => b[0]).join("")}» in ${describe(boxes[0][2])}; fonts asked for: ${fonts.join(" | ")}`);
    }
    if (out.counts.glyphs === 0) problem("no Chinese character found on the page: the glyph check looked at nothing");
  }

  // 4. Every diagram's text readable against what is behind it ---------------
  if (wants("contrast")) {
    // Source blocks mermaid did not turn into a drawing.
    for (const pre of document.querySelectorAll("pre.mermaid")) {
      if (!pre.querySelector("svg")) problem(`a mermaid block was not drawn: «${pre.textContent.trim().slice(0, 40)}»`);
    }
    // A diagram: an SVG in the text that holds text (icons hold none).
    const diagrams = [...main.querySelectorAll("svg")].filter((svg) => !svg.parentElement.closest("svg") && svg.textContent.trim());
    const hidden = (el) => el.closest("defs, marker, clipPath, mask, pattern, symbol, title, desc, style");
    for (const svg of diagrams) {
      out.counts.diagrams += 1;
      const name = svg.getAttribute("aria-roledescription") || svg.getAttribute("class") || "svg";
      const label = `${name} diagram «${(svg.querySelector("title, .chart-title, text") || svg).textContent.trim().slice(0, 30)}»`;
      const base = over(parse(getComputedStyle(svg).backgroundColor) || [0, 0, 0, 0], backdrop(svg.parentElement));
      // Everything in the SVG that paints a fill: shapes, and the HTML
      // boxes of labels inside a foreignObject.
      const painters = [...svg.querySelectorAll("rect, circle, ellipse, polygon, path, foreignObject *")].filter((el) => !hidden(el));
      const fillOf = (el) => {
        const s = getComputedStyle(el);
        if (s.display === "none" || s.visibility === "hidden") return null;
        const c = el instanceof SVGElement ? parse(s.fill) : parse(s.backgroundColor);
        if (!c) return "unknown";
        const alpha = c[3] * (el instanceof SVGElement ? parseFloat(s.fillOpacity) : 1) * opacity(el);
        return alpha > 0 ? [c[0], c[1], c[2], alpha] : null;
      };
      const covers = (el, x, y) => {
        if (el instanceof SVGGeometryElement) {
          const m = el.getScreenCTM();
          if (!m) return false;
          const p = new DOMPoint(x, y).matrixTransform(m.inverse());
          return el.isPointInFill(p);
        }
        const r = el.getBoundingClientRect();
        return x >= r.left && x <= r.right && y >= r.top && y <= r.bottom;
      };
      // The opaque colour at (x, y) below `node` in paint order: the page,
      // then every painter before it in the document that covers the point.
      const behind = (node, x, y, skip) => {
        let c = base;
        for (const el of painters) {
          if (el === skip || !(el.compareDocumentPosition(node) & Node.DOCUMENT_POSITION_FOLLOWING) || !covers(el, x, y)) continue;
          const fill = fillOf(el);
          if (fill === "unknown") {
            problem(`${label}: ${describe(el)} is filled with ${getComputedStyle(el).fill}, which the check cannot read`);
            continue;
          }
          if (fill) c = over(fill, c);
        }
        return c;
      };
      // Its text, each piece against what is behind its middle.
      let texts = 0;
      const walker = document.createTreeWalker(svg, NodeFilter.SHOW_TEXT);
      while (walker.nextNode()) {
        const node = walker.currentNode;
        const el = node.parentElement;
        if (!node.data.trim() || hidden(el)) continue;
        const range = document.createRange();
        range.selectNodeContents(node);
        const r = range.getBoundingClientRect();
        if (r.width === 0 || r.height === 0) continue;
        const s = getComputedStyle(el);
        if (s.display === "none" || s.visibility === "hidden") continue;
        const svgText = el instanceof SVGElement;
        const color = parse(svgText ? s.fill : s.color);
        if (!color) {
          problem(`${label}: the text «${node.data.trim().slice(0, 30)}» is filled with ${s.fill}, which the check cannot read`);
          continue;
        }
        const alpha = color[3] * (svgText ? parseFloat(s.fillOpacity) : 1) * opacity(el);
        const x = r.left + r.width / 2;
        const y = r.top + r.height / 2;
        const back = behind(node, x, y, null);
        const fore = over([color[0], color[1], color[2], alpha], back);
        const carrier = svgText ? el : el.closest("foreignObject");
        const m = carrier && carrier.getScreenCTM();
        const size = parseFloat(s.fontSize) * (m ? Math.hypot(m.a, m.b) : 1);
        const large = size >= 24 || (size >= 18.66 && parseInt(s.fontWeight, 10) >= 700);
        const need = large ? 3 : 4.5;
        const got = ratio(fore, back);
        texts += 1;
        if (!out.lowest || got < out.lowest.ratio) out.lowest = { ratio: got, text: node.data.trim().slice(0, 30), page: location.pathname.split("/").pop() };
        if (got < need) {
          problem(`${label}: the text «${node.data.trim().slice(0, 30)}» (${size.toFixed(1)} px) is ${shown(fore)} on ${shown(back)}, contrast ${got.toFixed(2)}, below ${need}`);
        }
      }
      out.counts.texts += texts;
      if (texts === 0) problem(`${label}: no text of it was found drawn: the contrast check looked at nothing`);

      // A chart's marks (bars, lines) stand out from what is behind them
      // (3:1, WCAG's rule for graphics), and each series has a colour of its
      // own, told apart at a glance (CIE76 distance of 20 or more). Mermaid's
      // xychart groups a series' marks in g.bar-plot-N / g.line-plot-N; the
      // book's own charts mark theirs with data-series.
      const series = new Map();
      const marks = [...svg.querySelectorAll("g[class^=bar-plot] rect, g[class^=line-plot] path, [data-series]")];
      for (const mark of marks) {
        const s = getComputedStyle(mark);
        const line = mark.tagName === "path" && s.fill === "none";
        const c = parse(line ? s.stroke : s.fill);
        if (!c || c[3] === 0) continue;
        const key = mark.getAttribute("data-series") || mark.parentElement.getAttribute("class");
        const r = mark.getBoundingClientRect();
        if (r.width === 0 && r.height === 0) continue;
        let back;
        if (line) {
          back = behind(mark, r.left + r.width / 2, r.top + r.height / 2, mark);
        } else {
          back = behind(mark, r.left + Math.min(2, r.width / 2), r.top + Math.min(2, r.height / 2), mark);
        }
        const fore = over([c[0], c[1], c[2], c[3] * opacity(mark)], back);
        out.counts.marks += 1;
        const got = ratio(fore, back);
        if (got < 3) problem(`${label}: a mark of series ${key} is ${shown(fore)} on ${shown(back)}, contrast ${got.toFixed(2)}, below 3`);
        if (!series.has(key)) series.set(key, fore);
      }
      const keys = [...series.keys()];
      for (let i = 0; i < keys.length; i++) {
        for (let j = i + 1; j < keys.length; j++) {
          const d = distance(series.get(keys[i]), series.get(keys[j]));
          if (d < 20) problem(`${label}: series ${keys[i]} (${shown(series.get(keys[i]))}) and ${keys[j]} (${shown(series.get(keys[j]))}) are too alike to tell apart (distance ${d.toFixed(0)} < 20)`);
        }
      }
    }
  }
  return out;
}
