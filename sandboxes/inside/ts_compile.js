// TypeScript compile step (runs as the candidate uid inside the sandbox, through compile.py):
//   node ts_compile.js SRC.ts OUT.js
// Transpiles with TypeScript's own parser (types are erased, not checked: a type error is no compile error, as
// with `tsc --noCheck`); a syntax error prints TypeScript's diagnostics and exits 1. esModuleInterop: a default
// import of a CommonJS module (`import assert from "assert"`, `import _ from "lodash"`) is the module itself, as
// under tsx (SandboxFusion's runner) and Node's own ESM loader.
"use strict";
const fs = require("fs");
const path = require("path");
const ts = require("/usr/local/lib/rewardbox-node/node_modules/typescript");

const [src, out] = process.argv.slice(2);
const text = fs.readFileSync(src, "utf8");
const result = ts.transpileModule(text, {
  fileName: path.basename(src),
  reportDiagnostics: true,
  compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.CommonJS, strict: false,
                     esModuleInterop: true },
});
const errors = (result.diagnostics || []).filter((d) => d.category === ts.DiagnosticCategory.Error);
if (errors.length) {
  for (const d of errors.slice(0, 20)) {
    const where = d.file && d.start !== undefined ? d.file.getLineAndCharacterOfPosition(d.start) : null;
    const loc = where ? `${path.basename(src)}(${where.line + 1},${where.character + 1})` : path.basename(src);
    process.stdout.write(`${loc}: error TS${d.code}: ${ts.flattenDiagnosticMessageText(d.messageText, "\n")}\n`);
  }
  process.exit(1);
}
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, result.outputText);
