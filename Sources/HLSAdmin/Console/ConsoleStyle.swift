/// The console's style sheet (inline in the page, allowed by its hash in the page's `Content-Security-Policy`).
enum ConsoleStyle {
    static let source = #"""

        [hidden]{display:none!important}
        body{font:14px system-ui,sans-serif;margin:0;color:#222;background:#f4f5f7}
        header{display:flex;align-items:center;gap:1em;padding:.7em 1.5em;background:#1f2933;color:#fff}
        header h1{font-size:1.2em;margin:0}
        #version{font-weight:400;color:#9aa5b1;font-size:.8em}
        .conn{font-size:.85em;color:#9aa5b1}.conn.live{color:#7bd88f}
        .message{flex:1;font-size:.9em;color:#e6e9ee}.message.error{color:#ff9b9b}
        main,.token{margin:1em 1.5em}
        .card{background:#fff;border-radius:6px;box-shadow:0 1px 2px rgba(0,0,0,.12);padding:.8em 1em;margin-bottom:1em}
        .card h2{font-size:1em;margin:0 0 .5em}
        .token{max-width:32em}.token input{width:20em}
        .error{color:#b22}
        .plots{display:grid;grid-template-columns:repeat(auto-fit,minmax(300px,1fr));gap:1em}
        .plots .card{margin:0}
        .plots svg{width:100%;height:auto;display:block}
        .summary{color:#555;font-size:.9em;margin:.4em 0 0}
        .legend{font-size:.8em;color:#555;margin:.3em 0 0}
        .swatch{display:inline-block;width:.9em;height:.9em;border-radius:2px;vertical-align:-.1em;margin:0 .2em 0 .6em}
        .swatch.cache{background:#3a9d6a}.swatch.origin{background:#e8912f}.swatch.ratio{background:#2762b0;height:.25em;vertical-align:.2em}
        svg text{font:10px system-ui,sans-serif;fill:#555}
        svg .axis{stroke:#ccc;stroke-width:1}
        svg .cache{fill:#3a9d6a}svg .origin{fill:#e8912f}
        svg .ratio{fill:none;stroke:#2762b0;stroke-width:1.5}svg .ratio-dot{fill:#2762b0}
        svg .track{fill:#e6e9ee}svg .used{fill:#3a9d6a}svg .used.full{fill:#c0392b}svg .used.high{fill:#e8912f}
        svg .st-good{fill:#3a9d6a}svg .st-busy{fill:#4a7fd0}svg .st-wait{fill:#e0a030}svg .st-bad{fill:#c0392b}svg .st-gone{fill:#aab2bd}
        .add{display:flex;flex-wrap:wrap;gap:.6em;align-items:flex-end}
        .add label{display:flex;flex-direction:column;font-size:.8em;color:#555;gap:.2em}
        .add label.wide{flex:1 1 24em}
        .add input,.add select{font:inherit;font-size:14px;padding:.3em .4em;border:1px solid #bbb;border-radius:4px}
        .add input[type=number]{width:6em}
        button{font:inherit;font-size:13px;padding:.3em .7em;border:1px solid #999;border-radius:4px;background:#fafafa;cursor:pointer}
        button:hover{background:#eef}button:disabled{opacity:.5;cursor:default}
        button[data-armed="1"]{background:#c0392b;color:#fff;border-color:#c0392b}
        .toolbar{display:flex;align-items:center;gap:1em}.toolbar h2{margin:0}.toolbar input{margin-left:auto;padding:.3em;width:18em}
        #item-count{font-weight:400;color:#777}
        table{border-collapse:collapse;width:100%;margin-top:.5em}
        th,td{text-align:left;padding:.35em .5em;border-bottom:1px solid #e3e3e3;vertical-align:middle}
        th{font-weight:600;background:#f7f7f7;font-size:.9em}
        td.item .name{font-weight:600}
        td.item .poster{float:left;width:48px;height:27px;object-fit:cover;margin:.1em .5em 0 0;border-radius:2px;background:#ddd}
        td.item .url{max-width:30em;overflow:hidden;text-overflow:ellipsis;white-space:nowrap;color:#777;font-size:.85em}
        .tag{display:inline-block;background:#e7eefb;color:#2762b0;border-radius:3px;padding:0 .35em;margin-right:.3em;font-size:.8em}
        .badge{display:inline-block;border-radius:3px;padding:.05em .45em;font-size:.85em;background:#e6e9ee}
        .badge.cached,.badge.partiallyCached{background:#d9f2e3;color:#1e6b43}
        .badge.downloading,.badge.queued{background:#dbe8fb;color:#1d4f91}
        .badge.paused,.badge.idle,.badge.ready{background:#fdf0d5;color:#8a5a00}
        .badge.failed,.badge.expired,.badge.evicted{background:#fadbd8;color:#922b21}
        .lock{margin-left:.3em;font-size:.8em;color:#8a5a00}
        .why{display:block;color:#922b21;font-size:.8em;max-width:18em}
        .bar{width:8em;height:.7em;background:#e6e9ee;border-radius:.35em;overflow:hidden;display:inline-block;vertical-align:middle}
        .bar>span{display:block;height:100%;background:#3a9d6a;width:0}
        .pct{font-size:.85em;color:#555;margin-left:.3em}
        .pager{margin:.6em 0 0;color:#555}#page-info{margin:0 .6em}
        td.actions{white-space:nowrap}td.actions button{margin-right:.25em}
        video{width:100%;max-width:480px;background:#000;border-radius:4px}

        """#
}
