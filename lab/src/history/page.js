// The history page's script (lab/src/history/page.rs draws the SVG): it
// filters, zooms and shows details; it draws nothing of the record itself.
// Hidden elements get display="none"; none is ever removed. The address's
// fragment holds the view: #only=stale&holders=holder-a,holder-c&from=10&to=20.
(function () {
  'use strict';
  var svg = document.getElementById('chart');
  var form = document.getElementById('controls');
  var detail = document.getElementById('detail');
  var END = +svg.dataset.end, LABEL = +svg.dataset.label, LANE = +svg.dataset.lane;
  var TOP = +svg.dataset.top, MIN = +svg.dataset.min;
  var lanes = Array.prototype.slice.call(svg.querySelectorAll('g.lane'));
  var zooms = Array.prototype.slice.call(svg.querySelectorAll('g.zoom'));
  var ops = Array.prototype.slice.call(svg.querySelectorAll('rect.op'));
  var wide = Array.prototype.slice.call(svg.querySelectorAll('rect.wide'));
  // Every bar with its true length in ms: the page widens short ones.
  var bars = Array.prototype.slice.call(svg.querySelectorAll('g.zoom rect')).map(function (r) {
    return [r, +(r.getAttribute('data-w') || r.getAttribute('width'))];
  });
  var view = { x0: 0, x1: END, only: '', holders: null };
  var width = 1100;

  function measure() {
    width = Math.max(300, (document.body.clientWidth || 1240) - LABEL - 16);
    svg.setAttribute('width', LABEL + width);
    document.getElementById('cliprect').setAttribute('width', width);
  }

  function scale() { return width / (view.x1 - view.x0); }

  // 1, 2 or 5 times a power of ten ms: about ten ticks across the window.
  function step() {
    var raw = (view.x1 - view.x0) / 10, p = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map(function (m) { return m * p; }).filter(function (s) { return s >= raw; })[0];
  }

  function axis() {
    var g = document.getElementById('axis'), s = step(), k = scale();
    while (g.firstChild) g.removeChild(g.firstChild);
    for (var t = Math.ceil(view.x0 / s) * s; t <= view.x1; t += s) {
      var x = LABEL + (t - view.x0) * k;
      var text = document.createElementNS(svg.namespaceURI, 'text');
      text.setAttribute('x', x); text.setAttribute('y', 14);
      text.textContent = (t / 1000).toFixed(Math.max(0, -Math.floor(Math.log10(s / 1000) + 1e-9))) + ' s';
      var tick = document.createElementNS(svg.namespaceURI, 'line');
      tick.setAttribute('x1', x); tick.setAttribute('x2', x); tick.setAttribute('y1', 16); tick.setAttribute('y2', TOP);
      g.appendChild(tick); g.appendChild(text);
    }
  }

  function hide(el, hidden) {
    if (hidden) el.setAttribute('display', 'none'); else el.removeAttribute('display');
  }

  function filter() {
    var cls = view.only === 'refused' ? 'ref' : view.only;
    ops.forEach(function (r) { hide(r, cls !== '' && !r.classList.contains(cls)); });
  }

  // The lanes shown, one under the other: a holder picked, in the window,
  // and, under a filter, holding an operation it shows.
  function layout() {
    var y = TOP;
    lanes.forEach(function (g) {
      var server = g.classList.contains('server');
      var show = server ? view.only === '' : (!view.holders || view.holders.has(g.dataset.holder));
      show = show && +g.dataset.start <= view.x1 && +g.dataset.end >= view.x0;
      if (show && view.only !== '') show = g.querySelector('rect.op:not([display])') !== null;
      hide(g, !show);
      if (show) { g.setAttribute('transform', 'translate(0,' + y + ')'); y += LANE; }
    });
    svg.setAttribute('height', y + 4);
    wide.forEach(function (r) { r.setAttribute('y', TOP); r.setAttribute('height', Math.max(0, y - TOP)); });
  }

  function apply() {
    var k = scale(), t = 'translate(' + LABEL + ',0) scale(' + k + ',1) translate(' + (-view.x0) + ',0)';
    zooms.forEach(function (g) { g.setAttribute('transform', t); });
    var least = MIN / k;
    bars.forEach(function (b) { b[0].setAttribute('width', Math.max(b[1], least)); });
    filter(); axis(); layout();
  }

  function fragment() {
    var p = [];
    if (view.only) p.push('only=' + view.only);
    if (view.holders) p.push('holders=' + Array.from(view.holders).join(','));
    if (view.x0 > 0 || view.x1 < END) p.push('from=' + (view.x0 / 1000).toFixed(3), 'to=' + (view.x1 / 1000).toFixed(3));
    // Replaced, not pushed: a zoom is not a page to go back to.
    try { history.replaceState(null, '', '#' + p.join('&')); } catch (e) { location.replace('#' + p.join('&')); }
  }

  // Where the story is: the checker's findings (a stale write accepted,
  // a floor gone back, a write lost, a token issued twice), or, in a run
  // with none, the refused writes; null for a page with neither. A run's
  // whole span can be seconds long with its story in its last
  // milliseconds: the page opens on this window, padded on each side,
  // and 整段 shows the whole run.
  function story() {
    var marks = ops.filter(function (r) { return /\b(stale|regression|lost|reused)\b/.test(r.getAttribute('class')); });
    if (!marks.length) marks = ops.filter(function (r) { return r.classList.contains('ref'); });
    if (!marks.length) return null;
    var lo = Infinity, hi = -Infinity;
    marks.forEach(function (r) {
      var x = +r.getAttribute('x'), w = +(r.getAttribute('data-w') || r.getAttribute('width'));
      lo = Math.min(lo, x); hi = Math.max(hi, x + w);
    });
    var pad = Math.max(hi - lo, END * 0.05, 50);
    var x0 = Math.max(0, lo - pad), x1 = Math.min(END, hi + pad);
    return x1 - x0 < END * 0.9 ? [x0, x1] : null;
  }
  var framed = false;

  function read() {
    var p = new URLSearchParams(location.hash.slice(1));
    view.only = p.get('only') || '';
    view.holders = p.get('holders') ? new Set(p.get('holders').split(',')) : null;
    var from = parseFloat(p.get('from')), to = parseFloat(p.get('to'));
    if (!framed && !p.has('from') && !p.has('to')) {
      // Once, when the address names no window: the story's.
      framed = true;
      var w = story();
      if (w) {
        from = w[0] / 1000; to = w[1] / 1000;
        detail.textContent = '这里只显示发现前后的一段（' + from.toFixed(2) + '–' + to.toFixed(2) + ' s，整段 ' + (END / 1000).toFixed(2) + ' s）；按“整段”看全部。';
      }
    }
    framed = true;
    view.x0 = isFinite(from) ? Math.max(0, from * 1000) : 0;
    view.x1 = isFinite(to) ? Math.min(END, to * 1000) : END;
    if (view.x0 >= END) view.x0 = 0;
    if (view.x1 <= view.x0) view.x1 = END;
    form.elements.only.value = view.only;
    Array.prototype.forEach.call(form.querySelectorAll('input[name=holder]'), function (c) {
      c.checked = !view.holders || view.holders.has(c.value);
    });
    form.elements.from.value = (view.x0 / 1000).toFixed(1);
    form.elements.to.value = (view.x1 / 1000).toFixed(1);
    apply();
  }

  function zoom(factor, at) {
    var span = Math.min(END, Math.max(2, (view.x1 - view.x0) * factor));
    var x0 = at - (at - view.x0) * span / (view.x1 - view.x0);
    view.x0 = Math.max(0, Math.min(END - span, x0));
    view.x1 = view.x0 + span;
    fragment(); read();
  }

  form.addEventListener('change', function (e) {
    if (e.target.name === 'only') view.only = e.target.value;
    if (e.target.name === 'holder') {
      var picked = Array.prototype.filter.call(form.querySelectorAll('input[name=holder]'), function (c) { return c.checked; });
      view.holders = picked.length === form.querySelectorAll('input[name=holder]').length ? null : new Set(picked.map(function (c) { return c.value; }));
    }
    if (e.target.name === 'only' || e.target.name === 'holder') { fragment(); read(); }
  });
  form.addEventListener('submit', function (e) {
    e.preventDefault();
    view.x0 = parseFloat(form.elements.from.value) * 1000 || 0;
    view.x1 = parseFloat(form.elements.to.value) * 1000 || END;
    fragment(); read();
  });
  form.elements.zoomin.addEventListener('click', function () { zoom(0.5, (view.x0 + view.x1) / 2); });
  form.elements.zoomout.addEventListener('click', function () { zoom(2, (view.x0 + view.x1) / 2); });
  form.elements.whole.addEventListener('click', function () { view.x0 = 0; view.x1 = END; fragment(); read(); });

  svg.addEventListener('wheel', function (e) {
    e.preventDefault();
    var at = view.x0 + (e.offsetX - LABEL) / scale();
    zoom(e.deltaY > 0 ? 1.25 : 0.8, Math.max(view.x0, Math.min(view.x1, at)));
  }, { passive: false });
  var drag = null;
  svg.addEventListener('mousedown', function (e) { drag = { x: e.clientX, x0: view.x0, x1: view.x1, moved: false }; });
  window.addEventListener('mousemove', function (e) {
    if (!drag) return;
    var dt = (e.clientX - drag.x) / scale();
    if (Math.abs(e.clientX - drag.x) > 3) drag.moved = true;
    var span = drag.x1 - drag.x0;
    view.x0 = Math.max(0, Math.min(END - span, drag.x0 - dt));
    view.x1 = view.x0 + span;
    apply();
  });
  window.addEventListener('mouseup', function () { if (drag && drag.moved) { fragment(); read(); } drag = drag && drag.moved ? null : drag; });
  svg.addEventListener('click', function (e) {
    var moved = drag && drag.moved;
    drag = null;
    if (moved) return;
    var r = e.target.closest('rect');
    if (!r || !r.querySelector('title')) return;
    Array.prototype.forEach.call(svg.querySelectorAll('.sel'), function (s) { s.classList.remove('sel'); });
    r.classList.add('sel');
    detail.textContent = r.querySelector('title').textContent;
  });
  window.addEventListener('hashchange', read);
  window.addEventListener('resize', function () { measure(); apply(); });
  measure();
  read();
})();
