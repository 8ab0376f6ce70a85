'use strict';
// The client scenario of cmd/counterd/clients_test.go, for Node client
// libraries. A script gives run() an adapter over its library; run() drives
// the steps, each bounded in time, and prints one JSON report on stdout:
//   {"client", "version", "steps": [{"name", "error"}], "sent": {key: delta}}
// "sent" counts every increment handed to the library, acknowledged or not,
// so the test can compare it with PostgreSQL. The step names and keys match
// clients_test.go and redis_py.py.
const fs = require('fs');
const path = require('path');

const STEP_TIMEOUT_MS = 20000;
const BIG_TIMEOUT_MS = 90000;
const BIG_COMMANDS = 100000;
const BIG_KEYS = 4;

// version returns the installed version of the package named name.
function version(name) {
  let dir = path.dirname(require.resolve(name));
  for (let i = 0; i < 10; i++) {
    const file = path.join(dir, 'package.json');
    if (fs.existsSync(file)) {
      const pkg = JSON.parse(fs.readFileSync(file, 'utf8'));
      if (pkg.name === name) return pkg.version;
    }
    dir = path.dirname(dir);
  }
  return 'unknown';
}

// errorEvents keeps the last distinct 'error' events the library emitted,
// so a step that times out says why the library was stuck.
const errorEvents = [];
function onError(err) {
  const m = message(err);
  if (!errorEvents.includes(m)) errorEvents.push(m);
  if (errorEvents.length > 3) errorEvents.shift();
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => {
      const events = errorEvents.length ? ` (the library's last 'error' events: ${errorEvents.join(' | ')})` : '';
      reject(new Error(`${what}: no answer within ${ms} ms${events}`));
    }, ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function expect(what, got, want) {
  const g = JSON.stringify(got);
  const w = JSON.stringify(want);
  if (g !== w) throw new Error(`${what}: got ${g}; want ${w}`);
}

// expectIncrs checks the replies to cmds ([key, by]): each the amount added.
function expectIncrs(what, replies, cmds) {
  if (!Array.isArray(replies) || replies.length !== cmds.length) {
    throw new Error(`${what}: got ${JSON.stringify(replies)?.slice(0, 200)}; want ${cmds.length} replies`);
  }
  replies.forEach((r, i) => {
    if (Number(r) !== cmds[i][1]) {
      throw new Error(`${what}: reply ${i} to ${cmds[i][1] === 1 ? 'INCR' : 'INCRBY'} ${cmds[i][0]}: got ${JSON.stringify(r)}; want ${cmds[i][1]}`);
    }
  });
}

function message(err) {
  if (err instanceof Error) {
    let m = `${err.constructor.name}: ${err.message}`;
    // node-redis wraps the errors of a pipeline or transaction.
    if (Array.isArray(err.errorIndexes) && Array.isArray(err.replies)) {
      m += ` (first error: ${err.replies[err.errorIndexes[0]]})`;
    }
    return m;
  }
  return String(err);
}

// run executes the scenario against a ({socket, onError}) => adapter, which
// must pass the library's 'error' events to onError, with methods
// connect, incr, incrby, get, mget, pipeline(cmds), transaction(cmds),
// flush, close. cmds is a list of [key, by]: INCR when by is 1, else INCRBY.
async function run(client, pkg, makeAdapter) {
  const [socket, prefix] = process.argv.slice(2);
  const report = { client, version: version(pkg), steps: [], sent: {} };
  const send = (key, by) => { report.sent[key] = (report.sent[key] || 0) + by; };
  let a;
  const step = async (name, fn, ms = STEP_TIMEOUT_MS) => {
    let error = '';
    try {
      await withTimeout(Promise.resolve().then(fn), ms, name);
    } catch (err) {
      error = message(err);
    }
    report.steps.push({ name, error });
  };

  await step('connect', async () => {
    a = makeAdapter({ socket, onError });
    expect('PING', await a.connect(), 'PONG');
  });
  const k = (s) => `${prefix}:${s}`;
  await step('incr', async () => {
    for (let i = 0; i < 3; i++) {
      send(k('incr'), 1);
      expect('INCR', Number(await a.incr(k('incr'))), 1);
    }
  });
  await step('incrby', async () => {
    send(k('incrby'), 5);
    expect('INCRBY 5', Number(await a.incrby(k('incrby'), 5)), 5);
    send(k('incrby'), -2);
    expect('INCRBY -2', Number(await a.incrby(k('incrby'), -2)), -2);
  });
  await step('get', async () => {
    expect('GET', await a.get(k('incr')), '3');
  });
  await step('mget', async () => {
    expect('MGET', await a.mget([k('incr'), k('incrby'), k('never')]), ['3', '3', '0']);
  });
  await step('pipeline', async () => {
    const cmds = [];
    for (let i = 0; i < 10; i++) cmds.push([k('pipeline:a'), 1], [k('pipeline:b'), 2]);
    cmds.forEach(([key, by]) => send(key, by));
    expectIncrs('pipeline', await a.pipeline(cmds), cmds);
  });
  await step('transaction', async () => {
    const cmds = [[k('transaction'), 1], [k('transaction'), 4]];
    cmds.forEach(([key, by]) => send(key, by));
    expectIncrs('MULTI/EXEC', await a.transaction(cmds), cmds);
  });
  await step('pipeline100k', async () => {
    const cmds = [];
    for (let i = 0; i < BIG_COMMANDS; i++) cmds.push([k(`pipeline100k:${i % BIG_KEYS}`), 1]);
    cmds.forEach(([key, by]) => send(key, by));
    expectIncrs('pipeline of 100000', await a.pipeline(cmds), cmds);
  }, BIG_TIMEOUT_MS);
  // FLUSH answers "flush not confirmed" when PostgreSQL has not committed
  // within COUNTERD_FLUSH_TIMEOUT (a loaded machine), and keeps the
  // increments: ask again, as a client should, within the step's time.
  await step('flush', async () => {
    for (;;) {
      try {
        expect('FLUSH', await a.flush(), 'OK');
        return;
      } catch (err) {
        if (!message(err).includes('flush not confirmed')) throw err;
      }
    }
  }, BIG_TIMEOUT_MS);

  if (a) {
    try {
      await withTimeout(Promise.resolve().then(() => a.close()), 5000, 'close');
    } catch (err) {
      // The report is what matters; the process exits below either way.
    }
  }
  process.stdout.write(JSON.stringify(report) + '\n');
  // A library still reconnecting must not keep the process alive.
  process.exit(0);
}

module.exports = { run };
