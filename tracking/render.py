"""The report's blocks as Markdown, and as one self-contained HTML page (plots inlined)."""
from __future__ import annotations

import base64
import html
import re
from typing import Any


_INLINE = [(re.compile(r"\[([^\]]+)\]\((https?://[^)\s]+)\)"), r'<a href="\2">\1</a>'),  # [text](url): only web addresses
           (re.compile(r"\*\*(.+?)\*\*"), r"<strong>\1</strong>"), (re.compile(r"`([^`]+)`"), r"<code>\1</code>")]


def _inline_html(text: str) -> str:
    out = html.escape(text, quote=False)
    for pat, rep in _INLINE:
        out = pat.sub(rep, out)
    return out


def _md_cell(x: Any) -> str:
    return str(x).replace("|", "\\|").replace("\n", " ")


def render_markdown(doc: list[tuple], plots: dict[str, str]) -> str:
    out = []
    for block in doc:
        kind = block[0]
        if kind == "h1":
            out.append(f"# {block[1]}\n")
        elif kind == "h2":
            out.append(f"## {block[1]}\n")
        elif kind == "p":
            out.append(block[1] + "\n")
        elif kind == "ul":
            out.append("\n".join(f"- {item}" for item in block[1]) + "\n")
        elif kind == "table":
            header, rows = block[1], block[2]
            lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "|".join("---" for _ in header) + "|"]
            lines += ["| " + " | ".join(_md_cell(x) for x in row) + " |" for row in rows]
            out.append("\n".join(lines) + "\n")
        elif kind == "img":
            out.append(f"![{block[2]}]({plots[block[1]]})\n")
    return "\n".join(out)


CSS = """
body{font-family:-apple-system,BlinkMacSystemFont,"Segoe UI",Helvetica,Arial,sans-serif;max-width:1000px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
h1{font-size:1.5em;border-bottom:1px solid #ddd;padding-bottom:.3em}h2{font-size:1.2em;margin-top:1.8em;border-bottom:1px solid #eee}
table{border-collapse:collapse;font-size:.85em;margin:.8em 0;display:block;overflow-x:auto}th,td{border:1px solid #ddd;padding:3px 7px;text-align:left;vertical-align:top}
th{background:#f4f4f4}tr:nth-child(even) td{background:#fafafa}code{background:#f2f2f2;padding:0 3px;border-radius:3px;font-size:.9em}
figure{margin:1em 0}img{max-width:100%;height:auto}figcaption{font-size:.8em;color:#666}li{margin:.3em 0}
""".strip()


def render_html(doc: list[tuple], images: dict[str, bytes], title: str) -> str:
    out = ["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">', f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>"]
    for block in doc:
        kind = block[0]
        if kind in ("h1", "h2"):
            out.append(f"<{kind}>{_inline_html(block[1])}</{kind}>")
        elif kind == "p":
            out.append(f"<p>{_inline_html(block[1])}</p>")
        elif kind == "ul":
            out.append("<ul>" + "".join(f"<li>{_inline_html(i)}</li>" for i in block[1]) + "</ul>")
        elif kind == "table":
            head = "".join(f"<th>{_inline_html(str(h))}</th>" for h in block[1])
            body = "".join("<tr>" + "".join(f"<td>{_inline_html(str(x))}</td>" for x in row) + "</tr>" for row in block[2])
            out.append(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
        elif kind == "img":
            data = base64.b64encode(images[block[1]]).decode("ascii")
            out.append(f'<figure id="plot-{block[1]}"><img alt="{html.escape(block[2])}" data-plot="{block[1]}" src="data:image/png;base64,{data}">'
                       f"<figcaption>{_inline_html(block[2])}</figcaption></figure>")
    out += ["</body>", "</html>"]
    return "\n".join(out) + "\n"
