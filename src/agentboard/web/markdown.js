// A small, XSS-safe markdown renderer.
//
// Safety model: the source is HTML-escaped FIRST; every later substitution only wraps that
// escaped text in a fixed set of tags. The only attribute ever built from user text is a link's
// href, and only for http(s):// and mailto: targets (checked on the escaped text, where no
// entity can smuggle a scheme in). Links always open with rel="noopener noreferrer".
//
// Supported: headings, paragraphs, bold, italic, strikethrough, inline code, fenced code,
// bullet and numbered lists, block quotes, horizontal rules, [links](https://…) and bare URLs.

const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

export function escapeHtml(text) {
  return String(text ?? "").replace(/[&<>"']/g, (c) => ESC[c]);
}

const SAFE_URL = /^(https?:\/\/[^\s]+|mailto:[^\s]+)$/i;
const MARK = "\u0001";

function link(href, label) {
  return `<a href="${href}" target="_blank" rel="noopener noreferrer">${label}</a>`;
}

/** Inline markup on one already-escaped line of text. */
function inline(escaped) {
  const slots = [];
  const keep = (html) => `${MARK}${slots.push(html) - 1}${MARK}`;
  let s = escaped;
  // code spans first: nothing inside them is formatted
  s = s.replace(/`([^`\n]+)`/g, (_, code) => keep(`<code>${code}</code>`));
  // [label](url): only safe schemes become links; anything else stays visible text
  s = s.replace(/\[([^\]\n]+)\]\(([^()\s]+)\)/g, (whole, label, url) => {
    if (!SAFE_URL.test(url)) return keep(`${label} (${url})`);
    return keep(link(url, emphasis(label)));
  });
  // bare URLs
  s = s.replace(/\bhttps?:\/\/(?:(?!&quot;|&#39;|&lt;|&gt;)[^\s\u0001])+/g, (url) => {
    const m = url.match(/^(.*?)((?:[.,;:!?)]|&amp;)*)$/);
    return keep(link(m[1], m[1])) + m[2];
  });
  s = emphasis(s);
  // restore kept fragments (a link label may itself hold a code span)
  for (let pass = 0; pass < 3 && s.includes(MARK); pass += 1) {
    s = s.replace(/\u0001(\d+)\u0001/g, (_, i) => slots[Number(i)]);
  }
  return s;
}

function emphasis(s) {
  return s
    .replace(/\*\*(?=\S)([^*]*?\S)\*\*/g, "<strong>$1</strong>")
    .replace(/(^|[^\w])__(?=\S)(.*?\S)__(?!\w)/g, "$1<strong>$2</strong>")
    .replace(/(^|[^*\w])\*(?=[^\s*])([^*\n]*?[^\s*])\*(?!\*)/g, "$1<em>$2</em>")
    .replace(/(^|[^\w])_(?=[^\s_])([^_\n]*?[^\s_])_(?!\w)/g, "$1<em>$2</em>")
    .replace(/~~(?=\S)(.*?\S)~~/g, "<del>$1</del>");
}

/** Render markdown source to an HTML string that is safe to assign to innerHTML. */
export function renderMarkdown(source) {
  const lines = escapeHtml(String(source ?? "").replace(/\u0001/g, "").replace(/\r\n?/g, "\n")).split("\n");
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    const fence = line.match(/^\s*```\s*([\w+-]*)\s*$/);
    if (fence) {
      const body = [];
      i += 1;
      while (i < lines.length && !/^\s*```\s*$/.test(lines[i])) body.push(lines[i++]);
      i += 1; // closing fence (or end of input)
      const cls = fence[1] ? ` class="lang-${fence[1]}"` : "";
      out.push(`<pre><code${cls}>${body.join("\n")}</code></pre>`);
      continue;
    }
    if (!line.trim()) { i += 1; continue; }
    const heading = line.match(/^(#{1,6})\s+(.*?)\s*#*\s*$/);
    if (heading) {
      const level = heading[1].length;
      out.push(`<h${level}>${inline(heading[2])}</h${level}>`);
      i += 1;
      continue;
    }
    if (/^\s*([-*_])(\s*\1){2,}\s*$/.test(line)) {
      out.push("<hr>");
      i += 1;
      continue;
    }
    if (/^\s*&gt;/.test(line)) {
      const quoted = [];
      while (i < lines.length && /^\s*&gt;/.test(lines[i])) quoted.push(lines[i++].replace(/^\s*&gt;\s?/, ""));
      out.push(`<blockquote>${quoted.map(inline).join("<br>")}</blockquote>`);
      continue;
    }
    const bullet = /^\s*[-*+]\s+(.*)$/;
    const numbered = /^\s*\d+[.)]\s+(.*)$/;
    if (bullet.test(line) || numbered.test(line)) {
      const re = bullet.test(line) ? bullet : numbered;
      const tag = re === bullet ? "ul" : "ol";
      const items = [];
      while (i < lines.length && re.test(lines[i])) {
        let text = lines[i].match(re)[1];
        const box = text.match(/^\[( |x|X)\]\s+(.*)$/);
        if (box) {
          text = `<input type="checkbox" disabled${box[1] === " " ? "" : " checked"}> ${inline(box[2])}`;
          items.push(`<li class="task-item">${text}</li>`);
        } else {
          items.push(`<li>${inline(text)}</li>`);
        }
        i += 1;
      }
      out.push(`<${tag}>${items.join("")}</${tag}>`);
      continue;
    }
    const para = [];
    while (
      i < lines.length && lines[i].trim() && !/^\s*```/.test(lines[i]) && !/^#{1,6}\s/.test(lines[i]) &&
      !/^\s*&gt;/.test(lines[i]) && !bullet.test(lines[i]) && !numbered.test(lines[i])
    ) {
      para.push(inline(lines[i]));
      i += 1;
    }
    out.push(`<p>${para.join("<br>")}</p>`);
  }
  return out.join("\n");
}

/** Render into an element (the one place the dashboard assigns innerHTML). */
export function renderInto(el, source) {
  el.innerHTML = renderMarkdown(source);
  return el;
}
