// Units spelt as the terminal and the Markdown spell them (render/units.py): shared by the
// HTML report (report.js) and the history page (history.js), each page inlining this first.
var opprofUnits = (function () {
  "use strict";
  function fmtTime(ns) {
    if (ns === null || ns === undefined) return "-";
    var us = ns / 1000, a = Math.abs(us);
    if (a >= 1e6) return (us / 1e6).toFixed(3) + "s";
    if (a >= 1e3) return (us / 1e3).toFixed(3) + "ms";
    return us.toFixed(3) + "us";
  }
  function fmtBytes(b) {
    if (b === null || b === undefined) return "-";
    var a = Math.abs(b);
    if (a >= 1073741824) return (b / 1073741824).toFixed(2) + " GB";
    if (a >= 1048576) return (b / 1048576).toFixed(2) + " MB";
    if (a >= 1024) return (b / 1024).toFixed(2) + " KB";
    return Math.round(b) + " B";
  }
  function fmtFlops(f) {
    if (f === null || f === undefined) return "-";
    var scales = [[1e12, "T"], [1e9, "G"], [1e6, "M"], [1e3, "K"]];
    for (var i = 0; i < scales.length; i++) {
      if (Math.abs(f) >= scales[i][0]) return (f / scales[i][0]).toFixed(2) + " " + scales[i][1] + "FLOP";
    }
    return Math.round(f) + " FLOP";
  }
  function fmtValue(v, unit) {
    if (v === null || v === undefined) return "-";
    if (unit === "ns") return fmtTime(v);
    if (unit === "bytes") return fmtBytes(v);
    if (unit === "flops") return fmtFlops(v);
    if (unit === "share") return (v * 100).toFixed(1) + "%";
    return Math.round(v).toLocaleString("en-US");
  }
  return { fmtTime: fmtTime, fmtBytes: fmtBytes, fmtFlops: fmtFlops, fmtValue: fmtValue };
})();
