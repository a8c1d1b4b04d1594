"""The report page's one stylesheet, inlined into the page (its CSP allows no other source)."""

CSS = """
:root{--ink:#1f2933;--muted:#616e7c;--line:#e4e7eb;--ok:#15803d;--bad:#b91c1c;--warn:#b45309;
--okbg:#ecfdf3;--badbg:#fef2f2;--warnbg:#fffbeb;--accent:#2563eb}
*{box-sizing:border-box}
body{margin:0;background:#f5f7fa;color:var(--ink);font:15px/1.5 system-ui,-apple-system,"Segoe UI",
Roboto,"DejaVu Sans",sans-serif}
main{max-width:1240px;margin:0 auto;padding:28px 32px 48px}
h1{font-size:24px;margin:0 0 4px;word-break:break-all}
h2{font-size:18px;margin:36px 0 12px;padding-bottom:6px;border-bottom:1px solid var(--line)}
h3{font-size:15px;margin:18px 0 8px}
.sub{color:var(--muted);margin:0 0 18px}
code,pre,.mono{font-family:ui-monospace,"DejaVu Sans Mono",Menlo,Consolas,monospace;font-size:13px}
.banner{border-radius:12px;padding:18px 22px;margin:8px 0 14px;border:1px solid}
.banner .word{font-size:30px;font-weight:800;letter-spacing:.02em}
.banner .why{font-size:16px;margin-top:2px}
.banner .checks{font-size:14px;margin-top:6px}
.SUCCESS{background:var(--okbg);border-color:#86efac;color:#14532d}
.FAILED{background:var(--badbg);border-color:#fca5a5;color:#7f1d1d}
.INCOMPLETE{background:var(--warnbg);border-color:#fcd34d;color:#78350f}
.UNPROVEN{background:var(--warnbg);border-color:#fcd34d;color:#78350f}
.PREEMPTED{background:#eef2ff;border-color:#a5b4fc;color:#312e81}
.RUNNING{background:#eff6ff;border-color:#93c5fd;color:#1e3a8a}
.banner .resume{font-family:ui-monospace,monospace;font-size:15px;margin-top:8px;font-weight:700}
.phases{display:grid;grid-template-columns:repeat(auto-fit,minmax(150px,1fr));gap:12px;margin:14px 0}
.phase{background:#fff;border:1px solid var(--line);border-radius:10px;padding:12px 14px}
.phase .name{font-size:12px;text-transform:uppercase;letter-spacing:.06em;color:var(--muted)}
.phase .state{font-size:17px;font-weight:700}
.phase .state.passed{color:var(--ok)}.phase .state.failed,.phase .state.bad{color:var(--bad)}
.phase .state.other{color:var(--warn)}
.phase .detail{color:var(--muted);font-size:13px}
.facts{display:grid;grid-template-columns:repeat(3,1fr);gap:10px 24px;background:#fff;
border:1px solid var(--line);border-radius:10px;padding:16px 18px}
.facts div span{display:block;font-size:12px;color:var(--muted);text-transform:uppercase;
letter-spacing:.05em}
.note{background:#eff6ff;border:1px solid #bfdbfe;border-radius:10px;padding:12px 16px;margin:14px 0}
.note.warn{background:var(--warnbg);border-color:#fcd34d}
table{border-collapse:collapse;width:100%;background:#fff;border:1px solid var(--line);
border-radius:10px;overflow:hidden}
th,td{text-align:left;padding:7px 12px;border-bottom:1px solid var(--line);vertical-align:top}
th{font-size:12px;color:var(--muted);text-transform:uppercase;letter-spacing:.05em;background:#fafbfc}
td.num{text-align:right;font-variant-numeric:tabular-nums}
.timeline .bar{height:14px;border-radius:7px;background:var(--accent);min-width:4px}
.timeline .bar.failed{background:var(--bad)}.timeline td.track{width:55%}
.figure-wrap{background:#fff;border:1px solid var(--line);border-radius:10px;padding:14px;overflow-x:auto}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(270px,1fr));gap:12px}
.chart{margin:0;background:#fff;border:1px solid var(--line);border-radius:10px;padding:10px 12px 4px}
.chart figcaption{font-size:13px;line-height:1.35}
.chart .tag{display:block;font-weight:600;overflow-wrap:anywhere}
.chart .last{display:block;color:var(--muted);font-size:12px}
.chart svg{display:block;max-width:100%;height:auto}
.samples pre{white-space:pre-wrap;word-break:break-word;margin:0;max-height:140px;overflow:auto}
.samples td:nth-child(1),.samples td:nth-child(2){width:44%}
.charts.small{grid-template-columns:repeat(auto-fill,minmax(214px,1fr));gap:10px}
.chart.small figcaption{font-size:12px}
.finding{background:#fff;border:1px solid var(--line);border-left:4px solid var(--bad);
border-radius:8px;padding:10px 14px;margin:8px 0}
.finding.warning{border-left-color:var(--warn)}
.finding .id{font-weight:700;font-family:ui-monospace,"DejaVu Sans Mono",monospace}
.finding .hint{color:var(--muted);margin-top:4px}
.ok-line{color:var(--ok);font-weight:600}
details summary{cursor:pointer;color:var(--accent)}
footer{margin-top:40px;color:var(--muted);font-size:13px}
.topology-svg{max-width:100%;height:auto}
.node-grid{display:grid;grid-template-columns:repeat(auto-fill,minmax(250px,1fr));gap:10px}
.node-card{margin:0;border:1px solid #cbd2d9;border-radius:10px;background:#f8fafc;
padding:8px 10px;min-width:0}
.node-card figcaption{font-size:13px;line-height:1.35;margin-bottom:6px;overflow-wrap:anywhere}
.node-card figcaption span{display:block;color:var(--muted);font-size:12px}
.node-card .node-svg{display:block;width:100%;max-width:242px;height:auto}
.node-card .cpu-only{color:var(--muted);font-size:12px;margin:4px 0}
.figure-wrap.grid{overflow:visible}
.transport{margin:10px 0 0;font-weight:600}
.rank-summary{margin-bottom:8px}
"""
