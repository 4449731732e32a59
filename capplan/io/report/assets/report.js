/* capplan plan report: draws the data embedded in #report-data. No network, no libraries. */
(function () {
  "use strict";
  var t0 = performance.now();
  var D = JSON.parse(document.getElementById("report-data").textContent);
  var W = D.workloads, A = D.assignments, N = D.nodes, M = D.models, T = D.tenants;
  var cur = D.currency === "USD" ? "$" : D.currency + " ";
  var isSched = D.plan.kind === "schedule";

  function esc(s) {
    return String(s).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c];
    });
  }
  function fmt(x, d) { return Number(x).toLocaleString("en-US", {maximumFractionDigits: d === undefined ? 1 : d}); }
  function money(x, d) { return cur + Number(x).toLocaleString("en-US", {minimumFractionDigits: d || 0,
    maximumFractionDigits: d || 0}); }
  function pct(a, b) { return b ? fmt(100 * a / b, 1) + "%" : "-"; }
  function hue(i, off) { return (off + i * 137.508) % 360; }
  function colour(i, off) { return "hsl(" + hue(i, off).toFixed(1) + "," + (58 + (i % 3) * 9) + "%," +
    (47 + (i % 4) * 6) + "%)"; }
  function dur(s) {
    if (s >= 86400 && s % 3600 === 0) { return fmt(s / 86400, 2) + " d"; }
    if (s >= 3600) { return fmt(s / 3600, 2) + " h"; }
    if (s >= 60) { return fmt(s / 60, 1) + " min"; }
    return s + " s";
  }

  /* colours: one CSS rule per workload, priority, kind and tenant; the body class picks which apply */
  var P = [], K = [], RUN = {};
  W.forEach(function (w) {
    if (P.indexOf(w.priority) < 0) { P.push(w.priority); }
    if (K.indexOf(w.kind) < 0) { K.push(w.kind); }
  });
  P.sort(function (a, b) { return b - a; });
  var pOf = W.map(function (w) { return P.indexOf(w.priority); }), kOf = W.map(function (w) { return K.indexOf(w.kind); });
  (D.running_rows || []).forEach(function (k) { RUN[k] = 1; });
  function acls(k) {  /* the classes of assignment k: colour keys, and whether it was running there already */
    var w = A[k][0];
    return "a w" + w + " t" + W[w].tenant + " p" + pOf[w] + " k" + kOf[w] + (RUN[k] ? " run" : " new");
  }
  var css = [];
  W.forEach(function (w, i) { css.push(".by-w .w" + i + "{background-color:" + colour(i, 12) + "}"); });
  T.forEach(function (t, i) { css.push(".by-t .t" + i + "{background-color:" + colour(i, 200) + "}"); });
  P.forEach(function (q, i) { css.push(".by-p .p" + i + "{background-color:" + colour(i, 40) + "}"); });
  K.forEach(function (q, i) { css.push(".by-k .k" + i + "{background-color:" + colour(i, 280) + "}"); });
  var st = document.createElement("style");
  st.textContent = css.join("\n");
  document.head.appendChild(st);
  var hl = document.createElement("style");
  document.head.appendChild(hl);

  /* header */
  var tot = D.totals, cost = D.cost;
  var kp = [["GPUs", fmt(tot.gpus, 0), ""], ["allocated", fmt(tot.allocated) + " (" + pct(tot.allocated, tot.gpus) + ")", "al"],
    ["idle", fmt(tot.idle) + " (" + pct(tot.idle, tot.gpus) + ")", "idl"],
    ["stranded", fmt(tot.stranded) + " (" + pct(tot.stranded, tot.gpus) + ")", "str"],
    ["cost / hour", money(cost.per_hour.total, 2), ""], ["cost / month", money(cost.per_month.total), ""],
    ["stranded / month", money(cost.per_month.stranded), "str"]];
  if (cost.horizon) {  /* a schedule: cost over its whole horizon, not the t = 0 snapshot */
    kp.splice(4, 3, ["allocated over " + dur(D.schedule.horizon_s), money(cost.horizon.allocated), "al"],
      ["capacity over " + dur(D.schedule.horizon_s), money(cost.horizon.capacity), ""]);
  }
  if (cost.unpriced_gpus) {
    kp.push(["unpriced (counted as 0)", fmt(cost.unpriced_gpus, 0) + " GPUs (" + esc(cost.unpriced_models.join(", ")) + ")", "warn"]);
  }
  var placedR = 0, totalR = 0;
  W.forEach(function (w) { placedR += w.placed; totalR += w.replicas; });
  kp.splice(1, 0, ["replicas " + (isSched ? "scheduled" : "placed"), fmt(placedR, 0) + " / " + fmt(totalR, 0), ""]);
  var h = '<h1>' + esc(D.title) + '</h1><div class="sub">' + (isSched ? "schedule" : "plan") + " · status <b>" +
    esc(D.plan.status) + "</b> · strategy " + esc(D.plan.strategy) + " · gap " + fmt(100 * D.plan.gap, 2) + "%" +
    (isSched ? " · horizon " + dur(D.schedule.horizon_s) + " · cluster map at t = 0" : "") +
    '</div><div class="kpis">' + kp.map(function (k) {
      return '<div class="kpi ' + k[2] + '"><b>' + k[1] + "</b><span>" + esc(k[0]) + "</span></div>";
    }).join("") + "</div>";
  document.getElementById("head").innerHTML = h;

  /* cluster map */
  function full(r) { return r[0] === 0 && r[1] === 1 && r[2] === 0 && r[3] === 1; }
  function cellHtml(ni, gi, c, model) {
    var mode = c[0], mig = mode === 2 || (mode === 0 && c[5] === "mig");
    var cls = "g" + (mig ? " mig" : mode === 3 ? " shared" : "") + (c[5] ? " preset" : "") + (c[6] ? " reconf" : "");
    var at = ' data-n="' + ni + '" data-g="' + gi + '"' + (mig && model ? ' style="--sl:' + model.slices + '"' : "");
    /* a GPU held whole by one replica, or wholly free, is drawn by the cell itself (half the elements) */
    if (c[1].length === 1 && !c[2].length && !c[3].length && full(c[1][0].slice(1))) {
      return '<div class="' + cls + " " + acls(c[1][0][0]) + '" data-a="' + c[1][0][0] + '"' + at + "></div>";
    }
    if (!c[1].length && c[2].length === 1 && !c[3].length && full(c[2][0])) {
      return '<div class="' + cls + ' idle"' + at + "></div>";
    }
    if (!c[1].length && !c[2].length && c[3].length === 1 && full(c[3][0])) {
      return '<div class="' + cls + ' str" data-r="' + esc(c[4]) + '"' + at + "></div>";
    }
    var s = '<div class="' + cls + '"' + at + ">";
    function box(r) {
      return "left:" + (100 * r[0]).toFixed(2) + "%;width:" + (100 * (r[1] - r[0])).toFixed(2) + "%;bottom:" +
        (100 * r[2]).toFixed(2) + "%;height:" + (100 * (r[3] - r[2])).toFixed(2) + "%";
    }
    c[1].forEach(function (u) {
      s += '<i class="' + acls(u[0]) + '" data-a="' + u[0] + '" style="' + box(u.slice(1)) + '"></i>';
    });
    c[2].forEach(function (r) { s += '<i class="idle" style="' + box(r) + '"></i>'; });
    c[3].forEach(function (r) { s += '<i class="str" data-r="' + esc(c[4]) + '" style="' + box(r) + '"></i>'; });
    if (c[4] && !c[3].length && c[0] === 2) {  /* every slice taken but compute to spare: a stranded corner */
      s += '<i class="str spare" data-r="' + esc(c[4]) + '"></i>';
    }
    return s + "</div>";
  }
  var slicesOf = {};
  M.forEach(function (m, i) { slicesOf[i] = {slices: m.slices || 8}; });
  var powerOf = {};
  D.power.forEach(function (p) { powerOf[p.level + "/" + p.name] = p; });
  function powerHtml(lvl, name) {
    var p = powerOf[lvl + "/" + name];
    if (!p) { return ""; }
    if (p.budget_w === null) { return '<span class="pwt">' + fmt(p.draw_w / 1000) + " kW</span>"; }
    var f = p.budget_w ? p.draw_w / p.budget_w : 1, cl = f > 0.95 ? "bad" : f > 0.8 ? "warn" : "";
    return '<span class="pw" title="GPU power vs budget"><i class="' + cl + '" style="width:' +
      Math.min(100, 100 * f).toFixed(1) + '%"></i></span><span class="pwt">' + fmt(p.draw_w / 1000) + " / " +
      fmt(p.budget_w / 1000) + " kW</span>";
  }
  function nodeHtml(i, lazy) {
    var n = N[i], m = n.model >= 0 ? M[n.model] : null, cells = D.cells[i], s, cols = Math.min(n.gpus, 8);
    s = '<div class="node" id="n-' + i + '" data-node="' + esc(n.name) + '"><div class="nn"><b>' + esc(n.name) +
      "</b>" + (n.spare_for ? '<span class="spare" title="hot spare held idle for ' + esc(n.spare_for) + '">spare · ' +
      esc(n.spare_for) + "</span>" : "") + "<span>" + (m ? esc(m.name.split("-")[0]) + " ×" + n.gpus : "") +
      "</span></div>";
    if (!n.gpus) { return s + '<div class="cpuonly">no GPUs · ' + fmt(n.cpu) + " cores</div></div>"; }
    if (lazy) {  /* a shell of the right size; its cells are drawn when it scrolls near the viewport */
      return s + '<div class="gs" style="--cols:' + cols + ";--rows:" + Math.ceil(n.gpus / 8) + '"></div></div>';
    }
    s += '<div class="gs" style="--cols:' + cols + '">';
    for (var g = 0; g < cells.length; g++) { s += cellHtml(i, g, cells[g], m ? slicesOf[n.model] : null); }
    return s + "</div></div>";
  }
  /* Large clusters: the first EAGER GPUs are drawn at once, later racks when they come near the viewport
     (every node is in the page from the start; only its cells wait). */
  var EAGER = 1500, drawnGpus = 0, lazyGroups = [];
  function nodesHtml(nodes) {
    var gpus = 0;
    nodes.forEach(function (i) { gpus += N[i].gpus; });
    var lazy = drawnGpus > 0 && drawnGpus + gpus > EAGER;
    if (!lazy) { drawnGpus += gpus; }
    var attr = lazy ? ' data-lazy="' + (lazyGroups.push(nodes) - 1) + '"' : "";
    return '<div class="nodes"' + attr + ">" + nodes.map(function (i) { return nodeHtml(i, lazy); }).join("") + "</div>";
  }
  function domHtml(d, depth) {
    var inner = "";
    if (d.children.length) {
      inner = '<div class="racks">' + d.children.map(function (c) { return domHtml(c, depth + 1); }).join("") + "</div>";
    }
    if (d.nodes.length) { inner += nodesHtml(d.nodes); }
    if (!d.name) { return inner; }
    var cls = d.children.length ? "blk" : "rack";
    return '<div class="' + cls + '" data-domain="' + esc(d.name) + '"><div class="hd">' + esc(d.name) +
      ' <span class="lv">' + esc(d.level) + "</span>" + powerHtml(d.level, d.name) + "</div>" + inner + "</div>";
  }
  var mapEl = document.getElementById("map");
  mapEl.innerHTML = D.tree.map(function (d) { return domHtml(d, 0); }).join("");
  function drawGroup(el) {
    var k = el.getAttribute("data-lazy");
    if (k === null) { return; }
    el.removeAttribute("data-lazy");
    el.innerHTML = lazyGroups[+k].map(function (i) { return nodeHtml(i, false); }).join("");
  }
  function drawAll() { Array.prototype.forEach.call(mapEl.querySelectorAll(".nodes[data-lazy]"), drawGroup); }
  if (lazyGroups.length) {
    if (window.IntersectionObserver) {
      var io = new IntersectionObserver(function (entries) {
        entries.forEach(function (e) { if (e.isIntersecting) { io.unobserve(e.target); drawGroup(e.target); } });
      }, {rootMargin: "600px 0px"});
      Array.prototype.forEach.call(mapEl.querySelectorAll(".nodes[data-lazy]"), function (el) { io.observe(el); });
    } else { drawAll(); }
  }

  /* legend and colour switch: one colour per workload up to MANY workloads; above, by priority, kind or
     tenant (the first that tells anything apart), with a short legend */
  var MANY = 36;
  function item(key, i, label, data) {
    return '<span class="li" data-' + data + '="' + esc(label) + '" data-' + key + '="' + i + '" data-sel="' + key + i +
      '"><span class="sw ' +
      key + i + '"></span>' + esc(label) + "</span>";
  }
  var keys = {
    w: function () { return W.map(function (w, i) { return w.placed ? item("w", i, w.name, "workload") : ""; }); },
    p: function () { return P.map(function (q, i) { return item("p", i, "priority " + q, "priority"); }); },
    k: function () { return K.map(function (q, i) { return item("k", i, q, "kind"); }); },
    t: function () { return T.map(function (t, i) { return item("t", i, t, "tenant"); }); }
  };
  var mode = W.length <= MANY ? "w" : P.length > 1 ? "p" : K.length > 1 ? "k" : T.length > 1 ? "t" : "p";
  function legend() {
    var items = keys[mode]();
    items.push('<span class="li"><span class="sw idle"></span>idle</span>');
    items.push('<span class="li"><span class="sw str"></span>stranded</span>');
    if (D.running_rows && D.running_rows.length) {
      items.push('<span class="li"><span class="sw run"></span>running (stays)</span>');
    }
    if (document.querySelector("#map .preset")) {
      items.push('<span class="li"><span class="sw preset"></span>preset MIG / share layout</span>');
    }
    if (document.querySelector("#map .reconf")) {
      items.push('<span class="li"><span class="sw reconf"></span>reconfigured (drain the node first)</span>');
    }
    document.getElementById("legend").innerHTML = items.join("");
  }
  document.body.className = "by-" + mode;
  document.getElementById("colour").value = mode;
  legend();
  document.getElementById("colour").addEventListener("change", function (e) {
    mode = e.target.value;
    document.body.className = "by-" + mode;
    legend();
    highlight(null);
  });
  function highlight(sel) {
    var map = document.getElementById("map");
    if (!sel) { hl.textContent = ""; map.classList.remove("dim"); return; }
    hl.textContent = ".dim .g." + sel + ",.dim .g i." + sel + "{opacity:1!important;outline:1px solid #111}";
    map.classList.add("dim");
  }
  document.getElementById("legend").addEventListener("click", function (e) {
    var li = e.target.closest(".li");
    if (!li) { return; }
    var on = li.classList.contains("on");
    Array.prototype.forEach.call(document.querySelectorAll("#legend .li.on"), function (x) { x.classList.remove("on"); });
    if (on || li.dataset.sel === undefined) { highlight(null); return; }
    li.classList.add("on");
    highlight(li.dataset.sel);
  });

  /* hover and click details */
  var tip = document.getElementById("tip"), det = document.getElementById("details");
  function rows(kv) {
    return "<table>" + kv.map(function (r) { return "<tr><td>" + esc(r[0]) + "</td><td>" + esc(r[1]) + "</td></tr>"; })
      .join("") + "</table>";
  }
  function aInfo(k) {
    var a = A[k], w = W[a[0]], n = N[a[2]], m = n.model >= 0 ? M[n.model].name : "";
    var what = a[4] ? "MIG " + a[4] : a[6] ? "share " + fmt(a[6], 3) : "whole GPU" + (a[3].length > 1 ? "s" : "");
    var kv = [["workload", w.name], ["replica", a[1]], ["priority", w.priority + (w.sla === "guaranteed" ? " (guaranteed)" : "")],
      ["tenant", T[w.tenant]], ["profile", what], ["start", a[5] >= 0 ? "memory slice " + a[5] : "-"],
      ["node", n.name + (m ? " (" + m + ")" : "")], ["GPU", a[3].join(", ")]];
    if (isSched) { kv.push(["runs", dur(a[7]) + " → " + dur(a[8])]); }
    return {title: w.name + " [" + a[1] + "]", kv: kv};
  }
  function freeInfo(el) {
    var cell = el.tagName === "I" ? el.parentNode : el, n = N[+cell.dataset.n], g = cell.dataset.g;
    if (el.classList.contains("str")) {
      return {title: "stranded", kv: [["where", n.name + " GPU " + g], ["why", D.stranded_reasons[el.dataset.r] || ""]]};
    }
    return {title: "idle", kv: [["where", n.name + " GPU " + g], ["note", "free; some workload of the scenario could use it"]]};
  }
  function infoOf(el) {
    if (!el || !el.classList || (el.tagName !== "I" && !el.classList.contains("g"))) { return null; }
    if (el.dataset.a !== undefined) { return aInfo(+el.dataset.a); }
    if (el.classList.contains("idle") || el.classList.contains("str")) { return freeInfo(el); }
    return null;
  }
  document.addEventListener("mouseover", function (e) {
    var info = infoOf(e.target);
    if (!info) { tip.style.display = "none"; return; }
    tip.innerHTML = "<b>" + esc(info.title) + "</b>" + rows(info.kv);
    tip.style.display = "block";
  });
  document.addEventListener("mousemove", function (e) {
    if (tip.style.display === "block") {
      var x = Math.min(e.clientX + 14, window.innerWidth - tip.offsetWidth - 8);
      var y = Math.min(e.clientY + 14, window.innerHeight - tip.offsetHeight - 8);
      tip.style.left = x + "px"; tip.style.top = y + "px";
    }
  });
  document.addEventListener("click", function (e) {
    var t = e.target;
    if (t.classList && t.classList.contains("x")) { det.style.display = "none"; highlight(null); return; }
    var go = t.closest && t.closest("a.goto");
    if (go) { e.preventDefault(); flash(+go.dataset.n); return; }
    var info = infoOf(t);
    if (!info) { return; }
    det.innerHTML = '<span class="x" title="close">✕</span><h3 id="details-title">' + esc(info.title) + "</h3>" +
      rows(info.kv);
    det.style.display = "block";
    det.dataset.a = t.dataset.a === undefined ? "" : t.dataset.a;
    if (t.dataset.a !== undefined) { highlight("w" + A[+t.dataset.a][0]); }
  });
  function flash(i) {
    var el = document.getElementById("n-" + i);
    if (!el) { return; }
    drawGroup(el.parentNode);
    el = document.getElementById("n-" + i);
    el.scrollIntoView({block: "center"});
    el.classList.remove("flash");
    void el.offsetWidth;
    el.classList.add("flash");
  }

  /* tables */
  function bar(parts) {
    return '<div class="bar">' + parts.map(function (p) {
      return '<i class="' + p[0] + '" style="left:' + (100 * p[1]).toFixed(2) + "%;width:" +
        (100 * Math.max(0, p[2])).toFixed(2) + '%"></i>';
    }).join("") + "</div>";
  }
  function table(head, body) {
    return "<table><tr>" + head.map(function (h) {
      return "<th" + (h.charAt(0) === "#" ? ' class="n">' + esc(h.slice(1)) : ">" + esc(h)) + "</th>";
    }).join("") + "</tr>" + body.map(function (r) {
      return "<tr>" + r.map(function (c, k) {
        return "<td" + (head[k].charAt(0) === "#" ? ' class="n"' : "") + ">" + c + "</td>";
      }).join("") + "</tr>";
    }).join("") + "</table>";
  }
  var pr = isSched ? D.priorities.map(function (p) {  /* work over the horizon against the schedule's bound */
    var top = Math.max(p.bound_gpu_hours || 0, p.gpu_hours) || 1;
    var parts = [["p", 0, p.gpu_hours / top]];
    if (p.bound_gpu_hours !== null) { parts.push(["b", 0, p.bound_gpu_hours / top]); }
    return [esc(p.priority) + (p.guaranteed ? ' <span class="tag">guaranteed</span>' : ""),
      fmt(p.placed_replicas, 0) + " / " + fmt(p.replicas, 0), fmt(p.gpu_hours, 1),
      p.bound_gpu_hours === null ? "-" : fmt(p.bound_gpu_hours, 1), bar(parts)];
  }) : D.priorities.map(function (p) {
    var top = Math.max(p.bound_gpus || 0, p.placed_gpus) || 1;
    var parts = [["p", 0, p.placed_gpus / top]];
    if (p.bound_gpus !== null) { parts.push(["b", 0, p.bound_gpus / top]); }
    return [esc(p.priority) + (p.guaranteed ? ' <span class="tag">guaranteed</span>' : ""),
      fmt(p.placed_replicas, 0) + " / " + fmt(p.replicas, 0), fmt(p.placed_gpus, 2),
      p.bound_gpus === null ? "-" : fmt(p.bound_gpus, 2), bar(parts)];
  });
  document.getElementById("prio").innerHTML = isSched ? table(["priority", "#replicas scheduled",
    "#GPU-hours done", "#bound (GPU-hours)", "done (blue) vs bound (line)"], pr) :
    table(["priority", "#replicas placed", "#GPUs placed", "#bound", "placed (blue) vs bound (line)"], pr);
  var ut = D.utilisation.map(function (u) {
    var g = u.gpus || 1;
    return [esc(u.model), fmt(u.gpus, 0), fmt(u.allocated, 2) + " (" + pct(u.allocated, u.gpus) + ")",
      fmt(u.idle, 2), fmt(u.stranded, 2),
      bar([["al", 0, u.allocated / g], ["id", u.allocated / g, u.idle / g], ["st", (u.allocated + u.idle) / g, u.stranded / g]])];
  });
  document.getElementById("util").innerHTML = table(["GPU model", "#GPUs", "#allocated", "#idle", "#stranded",
    "allocated · idle · stranded"], ut);
  var pw = D.power.map(function (p) {
    var f = p.budget_w ? p.draw_w / p.budget_w : 0;
    return [esc(p.name) + ' <span class="note">' + esc(p.level) + "</span>", fmt(p.draw_w / 1000, 2),
      p.budget_w === null ? "-" : fmt(p.budget_w / 1000, 2), p.budget_w ? pct(p.draw_w, p.budget_w) : "-",
      p.budget_w ? bar([[f > 0.95 ? "st" : f > 0.8 ? "wn" : "al", 0, Math.min(1, f)]]) : ""];
  });
  document.getElementById("power").innerHTML = pw.length ? table(["domain", "#GPU draw kW", "#budget kW", "#use", ""], pw)
    : '<p class="note">The cluster has no levels above nodes.</p>';
  var up = D.unplaced.map(function (u) {
    var w = W[u.workload];
    return [esc(w.name) + '<br><span class="note">' + esc(T[w.tenant]) + " · priority " + w.priority + "</span>",
      fmt(u.replicas.length, 0) + " of " + w.replicas, esc(u.reason),
      u.closest.length ? u.closest.map(function (c) {
        return '<a class="goto" href="#n-' + c[0] + '" data-n="' + c[0] + '">' + esc(N[c[0]].name) + "</a>: " + esc(c[1]);
      }).join("<br>") : '<span class="note">no node of an allowed GPU model</span>'];
  });
  document.getElementById("unplaced").innerHTML = up.length ? table(["workload", "#replicas", "reason",
    "closest nodes (what they lack)"], up) : '<p class="note">Every replica is ' + (isSched ? "scheduled" : "placed") + ".</p>";
  var gp = (D.goodput || []).map(function (r) {
    return [esc(r.workload), fmt(r.nodes, 0), fmt(r.gpus, 0), fmt(r.spares, 0) + (r.spares ? '<br><span class="note">' +
      r.spare_nodes.map(esc).join(", ") + "</span>" : ""), fmt(r.failure_rate_per_hour, 5),
      fmt(r.checkpoint_interval_s / 3600, 2), pct(r.goodput, 1), pct(r.goodput_per_provisioned_gpu, 1),
      fmt(r.lost_gpu_hours_per_day, 1)];
  });
  document.getElementById("goodput").innerHTML = gp.length ? table(["gang", "#nodes", "#GPUs", "#spares",
    "#interruptions/h", "#checkpoint every h", "#goodput", "#per provisioned GPU", "#GPU-h lost/day"], gp)
    : '<p class="note">No gang with checkpoint (see docs/concepts.md, Goodput).</p>';
  var c = D.cost;
  var kinds = [["allocated", "al"], ["idle", "id"], ["stranded", "st"], ["total", ""]];
  var hz = c.horizon ? "<h2>Over the horizon (" + dur(D.schedule.horizon_s) + ", GPU-hours &times; price)</h2>" +
    table(["capacity", "#GPU-hours", "#cost", "#share"], [
      ["allocated", fmt(c.horizon.gpu_hours, 1), money(c.horizon.allocated), pct(c.horizon.allocated, c.horizon.capacity)],
      ["unallocated", "", money(c.horizon.unallocated), pct(c.horizon.unallocated, c.horizon.capacity)],
      ["total", "", money(c.horizon.capacity), ""]]) +
    table(["tenant", "#GPU-hours", "#cost", "#share of cost"], c.horizon.tenants.map(function (t) {
      return [esc(t.tenant), fmt(t.gpu_hours, 1), money(t.cost), pct(t.share, 1)];
    })) + '<h2 style="margin-top:12px">At t = 0</h2>' : "";
  document.getElementById("cost").innerHTML = hz + table(["capacity", "#per hour", "#per month", "#share"],
    kinds.map(function (k) {
      return [k[0], money(c.per_hour[k[0]], 2), money(c.per_month[k[0]]), pct(c.per_hour[k[0]], c.per_hour.total)];
    })) + "<h2 style=\"margin-top:12px\">Showback per tenant</h2>" +
    table(["tenant", "#GPUs allocated", "#per hour", "#per month", "#share of cost"], c.tenants.map(function (t) {
      return [esc(t.tenant), fmt(t.gpus, 2), money(t.per_hour, 2), money(t.per_month), pct(t.share, 1)];
    })) + '<p class="note">Prices per GPU-hour: ' + M.map(function (m) {
      return esc(m.name) + " " + (m.price === null ? "none" : money(m.price, 2));
    }).join(", ") + ". A month is " + D.hours_per_month + " h. Idle and stranded capacity is not charged to tenants." +
    (c.unpriced_models.length ? " No price for " + esc(c.unpriced_models.join(", ")) + " (counted as 0)." : "") + "</p>";

  /* timeline (schedules) */
  if (isSched) {
    document.getElementById("timeline-sec").style.display = "";
    var H = D.schedule.horizon_s || 1, byNode = {};
    A.forEach(function (a, k) { (byNode[a[2]] = byNode[a[2]] || []).push(k); });
    var step = [60, 300, 900, 3600, 6 * 3600, 86400, 7 * 86400].filter(function (s) { return H / s <= 14; })[0] || H / 10;
    var ax = "";
    for (var t = 0; t <= H + 1e-9; t += step) {
      ax += '<span style="left:' + (100 * t / H).toFixed(2) + '%">' + dur(t) + "</span>";
    }
    var out = '<div class="axis">' + ax + "</div>";
    Object.keys(byNode).map(Number).sort(function (a, b) { return a - b; }).forEach(function (ni) {
      /* one lane per GPU (MIG instances at their slices, shares stacked), CPU-only replicas below */
      var n = N[ni], L = 5, ks = byNode[ni].slice().sort(function (x, y) { return A[x][7] - A[y][7]; });
      var cpuLanes = [], bars = "";
      function bar(k, top, hgt) {
        var a = A[k];
        return '<i class="' + acls(k) + '" data-a="' + k + '" style="left:' +
          (100 * a[7] / H).toFixed(3) + "%;width:" + Math.max(0.2, 100 * (a[8] - a[7]) / H).toFixed(3) + "%;top:" +
          top.toFixed(1) + "px;height:" + Math.max(1, hgt).toFixed(1) + 'px"></i>';
      }
      ks.forEach(function (k) {
        var a = A[k], g = a[3];
        if (!g.length) {
          var l = 0;
          while (l < cpuLanes.length && cpuLanes[l] > a[7]) { l++; }
          cpuLanes[l] = a[8];
          bars += bar(k, (n.gpus + l) * L + 1, L - 1);
          return;
        }
        var lo = Math.min.apply(null, g), hi = Math.max.apply(null, g);
        if (hi - lo + 1 === g.length) {
          bars += bar(k, (lo + (g.length === 1 ? a[9] : 0)) * L + 1,
            (g.length === 1 ? (a[10] - a[9]) : g.length) * L - 1);
        } else {
          g.forEach(function (x) { bars += bar(k, x * L + 1, L - 1); });
        }
      });
      var rows = Math.max(1, n.gpus + cpuLanes.length);
      out += '<div class="row" data-node-row="' + esc(n.name) + '"><div class="lab">' + esc(n.name) +
        (n.gpus ? ' <span class="note">' + n.gpus + " GPUs</span>" : "") + '</div><div class="trk" style="height:' +
        (rows * L + 2) + 'px">' + bars + "</div></div>";
    });
    document.getElementById("timeline").innerHTML = out;
    var wr = (D.schedule.workloads || []).map(function (r) {
      return [esc(r.name), r.start_s === null ? "-" : dur(r.start_s), r.end_s === null ? "-" : dur(r.end_s),
        r.wait_s === null ? "-" : dur(r.wait_s), r.deadline_met === null ? "-" :
          (r.deadline_met ? '<span class="tag good">met</span>' : '<span class="tag bad">missed</span>')];
    });
    document.getElementById("timeline-rows").innerHTML = wr.length ?
      table(["workload", "#start", "#end", "#wait", "deadline"], wr) : "";
  }
  /* two schedules side by side (capplan report --compare) */
  if (D.compare) {
    var C = D.compare, CH = C.horizon_s || 1, cout = "";
    C.rows.forEach(function (r) {
      function span(sp, top, cls) {
        if (sp[0] === null) { return ""; }
        return '<i class="a ' + cls + '" style="left:' + (100 * sp[0] / CH).toFixed(3) + "%;width:" +
          Math.max(0.2, 100 * (sp[1] - sp[0]) / CH).toFixed(3) + "%;top:" + top + 'px;height:5px"></i>';
      }
      cout += '<div class="row"><div class="lab">' + esc(r.name) + '</div><div class="trk" style="height:14px">' +
        span(r.first, 1, "cmp1") + span(r.second, 8, "cmp2") + "</div></div>";
    });
    document.getElementById("compare").innerHTML = cout;
    var cr = C.rows.map(function (r) {
      return [esc(r.name), esc(r.queue || "-"), r.first[0] === null ? "-" : dur(r.first[0]),
        r.second[0] === null ? "-" : dur(r.second[0]), r.wait_gpu_h[0], r.wait_gpu_h[1], r.saved_gpu_h];
    });
    cr.push(["<b>total</b>", "", "", "", C.wait_gpu_h[0], C.wait_gpu_h[1], "<b>" + C.saved_gpu_h + "</b>"]);
    document.getElementById("compare-rows").innerHTML = table(["workload", "queue", "#start (" + esc(C.labels[0]) + ")",
      "#start (" + esc(C.labels[1]) + ")", "#wait GPU-h (" + esc(C.labels[0]) + ")",
      "#wait GPU-h (" + esc(C.labels[1]) + ")", "#GPU-h saved"], cr);
  }
  window.capplanReport = {renderMs: performance.now() - t0, nodes: N.length, assignments: A.length, drawAll: drawAll,
    colourBy: function () { return mode; }};
  document.documentElement.setAttribute("data-rendered", "1");
  /* a deep link (report.html#cost-sec): the browser looked for the anchor before the page was built */
  function toHash() {
    var id = decodeURIComponent(location.hash.slice(1)), el = id && document.getElementById(id);
    if (el) { el.scrollIntoView(); }
  }
  toHash();
  window.addEventListener("hashchange", toHash);
})();
