// Warm eslint for JavaScript/TypeScript quality jobs (started by node_lint.py under its own uid, with the job
// rlimits and seccomp filter; it parses programs, it never runs them).
//   node eslint_server.js        requests on fd 3, replies on fd 4 (length-prefixed JSON frames, as wire.py)
// Config: eslint's own `recommended` (@eslint/js, pinned in sandboxes/image/node/package-lock.json), plus
// typescript-eslint's `recommended` for TypeScript. Inline configuration is off (noInlineConfig), so
// `/* eslint-disable */`, `// eslint-disable-line` and `/* eslint rule: 0 */` cannot raise the score; they and the
// TypeScript suppressions (@ts-ignore, @ts-nocheck, @ts-expect-error) are counted and reported.
"use strict";
const fs = require("fs");
// Resolve packages as a module living in the image's npm prefix would (package "exports" honoured).
const load = require("module").createRequire("/usr/local/lib/rewardbox-node/package.json");
const { Linter } = load("eslint");
const js = load("@eslint/js");
const tseslint = load("typescript-eslint");
const globals = load("globals");

const MAX_MESSAGES = 50;
const PRAGMA = /eslint-disable(?:-next-line|-line)?\b|\/\*\s*eslint(?:-enable)?\s|\/\*\s*globals?\s|@ts-(?:ignore|nocheck|expect-error)\b/g;
const base = {
  languageOptions: { ecmaVersion: 2022, sourceType: "script", globals: { ...globals.node, ...globals.es2021 } },
  linterOptions: { noInlineConfig: true, reportUnusedDisableDirectives: "off" },
};
// One change to the recommended rules: a program is graded on its own, so top-level names (the function the tests
// call) count as used; unused locals and arguments still count.
const UNUSED = { vars: "local", args: "after-used" };
const CONFIGS = {
  javascript: [js.configs.recommended, base, { rules: { "no-unused-vars": ["error", UNUSED] } }],
  typescript: [js.configs.recommended, ...tseslint.configs.recommended, { ...base, files: ["**/*.ts"] },
    { files: ["**/*.ts"], rules: { "@typescript-eslint/no-unused-vars": ["error", UNUSED] } }],
};
const FILENAMES = { javascript: "solution.js", typescript: "solution.ts" };
// Each lint depends only on its program. A program is parsed, never run, and inline configuration is off, so no
// comment of one program reaches another's lint; eslint builds a new config array per verify() and keeps its
// per-file state (source code, scopes, rule listeners) in per-verify objects. What is left to share is made
// unshareable: a new Linter per lint (no measurable cost) and our config objects frozen (Object.freeze, deep;
// the parsers and plugins they name are eslint's own modules and left as they are).
function freezeOwn(value) {
  if (value && typeof value === "object" && !Object.isFrozen(value)) {
    Object.freeze(value);
    for (const key of Object.keys(value)) if (key !== "plugins" && key !== "parser") freezeOwn(value[key]);
  }
  return value;
}
for (const configs of Object.values(CONFIGS)) configs.forEach(freezeOwn);
Object.freeze(CONFIGS);
let linter = null;

function countStatements(ast) {
  let n = 0;
  const stack = [ast];
  while (stack.length) {
    const node = stack.pop();
    if (!node || typeof node.type !== "string") continue;
    if (/(Statement|Declaration)$/.test(node.type) && node.type !== "BlockStatement") n++;
    for (const key of Object.keys(node)) {
      if (key === "parent") continue;
      const v = node[key];
      if (Array.isArray(v)) stack.push(...v);
      else if (v && typeof v.type === "string") stack.push(v);
    }
  }
  return n;
}

function lint(code, language) {
  linter = new Linter({ configType: "flat" });
  const messages = linter.verify(code, CONFIGS[language], { filename: FILENAMES[language] })
    .filter((m) => !(m.ruleId === null && /noInlineConfig/.test(m.message)));
  const fatal = messages.some((m) => m.fatal);
  const statements = fatal ? 0 : countStatements(linter.getSourceCode().ast);
  const problems = messages.filter((m) => m.severity >= 1).length;
  const score = fatal ? 0 : Math.max(0, Math.min(10, 10 - (10 * problems) / Math.max(1, statements)));
  return {
    ok: !fatal,
    eslint_score: score,
    statements,
    suppressions: (code.match(PRAGMA) || []).length,
    messages: messages.slice(0, MAX_MESSAGES).map((m) => ({ id: m.ruleId || (m.fatal ? "parse-error" : "eslint"),
      line: m.line || 0, text: String(m.message).slice(0, 200) })),
    message_count: messages.length,
  };
}

function send(obj) {
  const body = Buffer.from(JSON.stringify(obj), "utf8");
  const frame = Buffer.alloc(4 + body.length);
  frame.writeUInt32BE(body.length, 0);
  body.copy(frame, 4);
  let off = 0;
  while (off < frame.length) off += fs.writeSync(4, frame, off, frame.length - off);
}

function readExact(n) {
  const buf = Buffer.alloc(n);
  let off = 0;
  while (off < n) {
    let got;
    try {
      got = fs.readSync(3, buf, off, n - off, null);
    } catch (e) {
      if (e.code === "EAGAIN") continue;
      return null;
    }
    if (got === 0) return null;
    off += got;
  }
  return buf;
}

lint("function warm(a) { return a + 1; }\nwarm(1);\n", "javascript");
lint("function warm(a: number): number { return a + 1; }\nwarm(1);\n", "typescript");
send({ ready: true });
for (;;) {
  const head = readExact(4);
  if (head === null) break;
  const body = readExact(head.readUInt32BE(0));
  if (body === null) break;
  const req = JSON.parse(body.toString("utf8"));
  let reply;
  try {
    reply = CONFIGS[req.language] ? lint(String(req.code), req.language) : { error: `no linter for ${req.language}` };
  } catch (e) {
    reply = { error: String(e && e.stack ? e.stack : e).slice(0, 2000) };
  }
  send(reply);
}
