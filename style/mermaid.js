// Mermaid's themes, made readable where they are not: lab/tests/visual.rs
// measures every diagram of the book in each of mdBook's themes, and these
// are the colours it found too faint (text under WCAG's 4.5:1 against what is
// behind it, chart marks under 3:1).
//
// mdbook-mermaid's mermaid-init.js runs just before this script and picks
// mermaid's theme from mdBook's ("default" for light and rust, "dark" for
// coal, navy and ayu). Mermaid draws on the page's load event, after every
// script; so calling initialize again here, with the same theme and these
// variables, is what it draws with. initialize replaces the whole
// configuration, hence the theme and startOnLoad again.
(() => {
  const theme = mermaid.mermaidAPI.getConfig().theme;
  const light = {
    // Gantt (the F4 and F5 timelines): white text on #8a90dd is 2.9:1 and
    // on red 4:1; darker bars keep the white text.
    taskBkgColor: "#535bbf",
    taskBorderColor: "#3f4699",
    critBkgColor: "#c62828",
    critBorderColor: "#8e1b1b",
    // xychart: mermaid's first colour, #ececff, is 1.1:1 on white.
    xyChart: { plotColorPalette: "#2874a6, #c0392b, #1e8449, #8e44ad" },
  };
  const dark = {
    // Sequence diagrams' notes: #b8b6b6 on #474949 is 4.49:1.
    noteTextColor: "#e0e0e0",
    // State diagrams' edge labels: #ccc on #585858 is 4.4:1.
    edgeLabelBackground: "#383838",
    // Gantt: the critical bar (a pause) under light text, 3.1:1.
    critBkgColor: "#a52a2a",
    critBorderColor: "#d35454",
    // xychart: the dark theme's own colours are readable on its grey; an
    // xyChart given here would replace the grey with white.
  };
  mermaid.initialize({ startOnLoad: true, theme, themeVariables: theme === "dark" ? dark : light });
})();
