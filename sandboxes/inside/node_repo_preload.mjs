// Loaded with --import before the test file (node_repo.py), as the candidate uid: arms rewardbox's reporter with
// the job's token (stdin, read here before any package code runs), locks the parts of node a package could use to
// fake a pass from its own code, and starts node's test runner so that the reporter is bound to node's own stream
// before the test file (and the package it imports) runs.
import fs from 'node:fs';
import assert from 'node:assert';
import strict from 'node:assert/strict';
import Module from 'node:module';
import test from 'node:test';
import { arm } from './node_repo_reporter.mjs';

const config = JSON.parse(fs.readFileSync(0, 'utf8'));
let bound;
const reporterBound = new Promise((resolve) => { bound = resolve; });
arm(String(config.token), bound);

// Assertions and the test API are shared module objects: a package that rebinds assert.strictEqual or test.it for
// the test file that imports it afterwards would turn failures into passes. Frozen (a write throws in strict code).
const freezeDeep = (obj) => {
  Object.freeze(obj);
  for (const key of Object.getOwnPropertyNames(obj)) {
    const desc = Object.getOwnPropertyDescriptor(obj, key);
    const v = desc && desc.value;
    if ((typeof v === 'function' || (typeof v === 'object' && v !== null)) && !Object.isFrozen(v)
        && key !== 'prototype') freezeDeep(v);
  }
};
for (const obj of [assert, strict, test]) freezeDeep(obj);
// require/import hooks: a package could hand the test file a fake assert, or rewrite code as it loads.
const lock = (obj, key) => {
  const desc = Object.getOwnPropertyDescriptor(obj, key);
  if (!desc || !desc.configurable) return;
  Object.defineProperty(obj, key, 'value' in desc ? { writable: false, configurable: false }
    : { get: desc.get, set: undefined, configurable: false });  // wrap/wrapper: an accessor that rewrites CJS code
};
for (const key of ['_load', '_resolveFilename', 'register', 'wrap', 'wrapper', '_extensions']) lock(Module, key);
Object.freeze(Module._extensions);
for (const key of ['require', '_compile', 'load']) lock(Module.prototype, key);
// The async iteration the reporter runs on.
Object.freeze(Object.getPrototypeOf(async function* () {}).prototype);
Object.freeze(Object.getPrototypeOf(Object.getPrototypeOf(async function* () {}).prototype));

// Bootstrap the runner now (its events carry this file's path and are ignored), and wait until node has handed the
// reporter its stream, so nothing the package does later can be mistaken for the runner's own start.
test('rewardbox: bind reporter', () => {});
await reporterBound;
