// rewardbox's node:test reporter for repo jobs (node_repo.py). Loaded by node_repo_preload.mjs before any code of
// the repository runs, then named to node with --test-reporter: node hands it the test runner's own event stream.
//
// Verdicts leave on fd 3, a pipe only this process and the runner hold, each frame carrying the job's token (read
// from stdin by the preload before any package code ran) and a consecutive number: output on stdout (fake TAP or
// summaries), frames written by anyone else and a closed or replaced fd pass nothing. Everything used on the way out
// (fs.writeSync, JSON.stringify) is captured here at load, before the package could replace it.
import fs from 'node:fs';

const writeSync = fs.writeSync;
const stringify = JSON.stringify;
const REPORT_FD = 3;
const MESSAGE_CAP = 1500;
let token = null;
let seq = 0;
let invoked = false;
let onInvoke = null;

function send(frame) {
  if (token === null) return;
  seq += 1;
  try {
    writeSync(REPORT_FD, stringify({ ...frame, t: token, n: seq }) + '\n');
  } catch {
    // the fd was closed or replaced by the package: the runner sees frames missing and passes nothing
  }
}

// Once, from the preload: the token, and a callback for when node hands over its stream.
export function arm(secret, invokedCallback) {
  if (token !== null) throw new Error('rewardbox reporter: already armed');
  token = secret;
  onInvoke = invokedCallback;
}

function messageOf(data) {
  const err = data && data.details && data.details.error;
  if (!err) return '';
  const cause = err.cause !== undefined ? err.cause : err;
  try {
    return String((cause && cause.stack) || cause).slice(0, MESSAGE_CAP);
  } catch {
    return 'the test failed (its error could not be shown)';
  }
}

export default async function* reporter(source) {
  if (invoked) {  // node invokes it once, before the package runs (the preload waits for it): a second call is forged
    send({ event: 'integrity', problem: 'the rewardbox reporter was invoked a second time' });
    return;
  }
  invoked = true;
  send({ event: 'start' });
  if (onInvoke) onInvoke();
  const stack = [];
  for await (const ev of source) {
    const data = ev.data || {};
    if (ev.type === 'test:start') {
      stack.length = data.nesting;
      stack[data.nesting] = String(data.name);
      send({ event: 'started', file: String(data.file), path: stack.slice(0, data.nesting + 1) });
    } else if (ev.type === 'test:pass' || ev.type === 'test:fail') {
      stack.length = data.nesting;
      const path = [...stack, String(data.name)];
      send({ event: 'case', file: String(data.file), path, passed: ev.type === 'test:pass',
             skip: data.skip !== undefined && data.skip !== false, todo: data.todo !== undefined && data.todo !== false,
             message: ev.type === 'test:fail' ? messageOf(data) : '' });
    }
  }
  send({ event: 'finish' });
}
