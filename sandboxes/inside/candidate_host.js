// Candidate side of a JavaScript/TypeScript judge job: the counterpart of candidate_host.py, same protocol.
//   node candidate_host.js solution.js
// Runs as the candidate uid. Requests arrive on fd 3 and replies leave on fd 4 as length-prefixed JSON frames
// (wire.py); values use codec.py's tagged encoding. Nothing here is trusted by the judge: it decodes replies as
// plain data and compares them itself, in its own process, under its own uid. The candidate can only choose what
// its functions return, never a verdict. Everything this file needs is captured before candidate code runs.
// Flags are computed on the host from the source (graders/flags.py), never here.
"use strict";
const fs = require("fs");
const vm = require("vm");

const REQ_FD = 3;
const REP_FD = 4;
const writeSync = fs.writeSync;
const readSync = fs.readSync;
const stringify = JSON.stringify;
const parse = JSON.parse;
const BufferFrom = Buffer.from;
const BufferAlloc = Buffer.alloc;
const BufferConcat = Buffer.concat;
const isArray = Array.isArray;
const getPrototypeOf = Object.getPrototypeOf;
const ObjectProto = Object.prototype;
const keys = Object.keys;
const MAX_DEPTH = 200;
const DECIMAL_DIGITS = 4000; // codec.py: longer ints travel in hexadecimal ("h")

function encodeBig(v) {
  const text = v.toString();
  return text.length > DECIMAL_DIGITS ? ["h", v.toString(16)] : ["i", text];
}

function send(obj) {
  const body = BufferFrom(stringify(obj), "utf8");
  const frame = BufferAlloc(4 + body.length);
  frame.writeUInt32BE(body.length, 0);
  body.copy(frame, 4);
  let off = 0;
  while (off < frame.length) off += writeSync(REP_FD, frame, off, frame.length - off);
}

function readExact(n) {
  const buf = BufferAlloc(n);
  let off = 0;
  while (off < n) {
    let got;
    try {
      got = readSync(REQ_FD, buf, off, n - off, null);
    } catch (e) {
      if (e.code === "EAGAIN") continue;
      return null;
    }
    if (got === 0) return null;
    off += got;
  }
  return buf;
}

function recv() {
  const head = readExact(4);
  if (head === null) return null;
  const body = readExact(head.readUInt32BE(0));
  return body === null ? null : parse(body.toString("utf8"));
}

class Unencodable extends Error {}

function encode(v, depth = 0) {
  if (depth > MAX_DEPTH) throw new Unencodable("value nested too deeply");
  if (v === null || v === undefined) return ["n"];
  switch (typeof v) {
    case "boolean":
      return ["b", v];
    case "bigint":
      return encodeBig(v);
    case "string":
      return ["s", v];
    case "number":
      if (Number.isInteger(v)) return encodeBig(BigInt(v));
      if (Number.isNaN(v)) return ["f", "nan"];
      if (!Number.isFinite(v)) return ["f", v > 0 ? "inf" : "-inf"];
      return ["f", String(v)];
    case "object":
      break;
    default:
      throw new Unencodable(`a ${typeof v} is not plain data`);
  }
  if (isArray(v)) return ["l", v.map((x) => encode(x, depth + 1))];
  if (v instanceof Map) return ["d", [...v.entries()].map(([k, x]) => [encode(k, depth + 1), encode(x, depth + 1)])];
  if (v instanceof Set) return ["S", [...v].map((x) => encode(x, depth + 1))];
  if (v instanceof Uint8Array) return ["y", BufferFrom(v).toString("base64")];
  const proto = getPrototypeOf(v);
  if (proto !== ObjectProto && proto !== null) throw new Unencodable("only plain objects are plain data");
  return ["d", keys(v).map((k) => [["s", k], encode(v[k], depth + 1)])];
}

function decode(o, depth = 0) {
  if (depth > MAX_DEPTH || !isArray(o) || typeof o[0] !== "string") throw new Unencodable("malformed encoding");
  const [tag, p] = o;
  switch (tag) {
    case "n":
      return null;
    case "b":
    case "s":
      return p;
    case "i":
    case "h": {
      const hex = tag === "h";
      const big = hex ? (p.startsWith("-") ? -BigInt("0x" + p.slice(1)) : BigInt("0x" + p)) : BigInt(p);
      return big >= BigInt(Number.MIN_SAFE_INTEGER) && big <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(big) : big;
    }
    case "f":
      return { nan: NaN, inf: Infinity, "-inf": -Infinity }[p] ?? Number(p);
    case "l":
    case "t":
      return p.map((x) => decode(x, depth + 1));
    case "S":
    case "F":
      return new Set(p.map((x) => decode(x, depth + 1)));
    case "y":
      return BufferFrom(p, "base64");
    case "d": {
      const pairs = p.map(([k, x]) => [decode(k, depth + 1), decode(x, depth + 1)]);
      if (pairs.every(([k]) => typeof k === "string")) {
        const out = {};
        for (const [k, x] of pairs) out[k] = x;
        return out;
      }
      return new Map(pairs);
    }
    default:
      throw new Unencodable(`malformed encoding with tag ${tag}`);
  }
}

function shortError(e) {
  const name = e && e.constructor && typeof e.constructor.name === "string" ? e.constructor.name : "Error";
  return `${name}: ${e && e.message !== undefined ? e.message : String(e)}`.slice(0, 500);
}

const IDENT = /^[A-Za-z_$][\w$]*$/;
const DECLARED = /(?:^|[^\w$.])(?:function\s*\*?|class|const|let|var)\s+([A-Za-z_$][\w$]*)/g;

function lookup(name) {
  const [head, rest] = name.split(".", 2);
  if (!IDENT.test(head) || (rest !== undefined && !IDENT.test(rest))) throw new Error(`bad name ${name}`);
  const exported = globalThis.module && globalThis.module.exports;
  let obj;
  if (exported && typeof exported === "object" && head in exported) obj = exported[head];
  else if (typeof exported === "function" && exported.name === head) obj = exported;
  else obj = vm.runInThisContext(head); // top-level function/const/let/class of the script
  if (rest !== undefined) {
    const inst = new obj();
    const method = inst[rest];
    return typeof method === "function" ? method.bind(inst) : method;
  }
  return obj;
}

async function answer(req) {
  let target;
  try {
    target = lookup(String(req.call));
  } catch (e) {
    return { error: shortError(e), kind: "missing" };
  }
  let result;
  try {
    if (req.op === "get") {
      result = target;
    } else {
      const args = decode(req.args || ["l", []]);
      result = target(...args);
      if (result && typeof result.then === "function") result = await result;
    }
  } catch (e) {
    return { error: shortError(e), kind: "exception" };
  }
  try {
    return { value: encode(result) };
  } catch (e) {
    return { error: shortError(e), kind: "unencodable" };
  }
}

async function main() {
  const code = fs.readFileSync(process.argv[2], "utf8");
  let script;
  try {
    script = new vm.Script(code, { filename: "solution.js" });
  } catch (e) {
    send({ event: "parsed", ok: false, error: shortError(e) });
    return;
  }
  send({ event: "parsed", ok: true });
  globalThis.module = { exports: {} };
  globalThis.exports = globalThis.module.exports;
  globalThis.require = require;
  try {
    script.runInThisContext();
  } catch (e) {
    send({ event: "loaded", ok: false, error: shortError(e), kind: "exception" });
    return;
  }
  const names = {};
  const exported = globalThis.module.exports;
  const candidates = new Set([...code.matchAll(DECLARED)].map((m) => m[1]));
  if (exported && typeof exported === "object") for (const k of keys(exported)) candidates.add(k);
  for (const name of candidates) {
    try {
      names[name] = typeof lookup(name) === "function" ? "callable" : "value";
    } catch (e) {
      // declared in a nested scope only: not reachable by the tests
    }
  }
  send({ event: "loaded", ok: true, names });
  for (;;) {
    const req = recv();
    if (req === null) return;
    send(await answer(req));
  }
}

main().then(
  () => process.exit(0),
  (e) => {
    process.stderr.write(shortError(e) + "\n");
    process.exit(1);
  },
);
