'use strict';
// ioredis with its default options (only the socket path set).
// Usage: node ioredis.js SOCKET PREFIX
const Redis = require('ioredis');
const { run } = require('./scenario');

const cmd = ([key, by]) => (by === 1 ? ['incr', key] : ['incrby', key, by]);

// results turns ioredis's [[err, reply], ...] into the replies, throwing
// the first error.
function results(res) {
  if (res === null) throw new Error('EXEC returned null (transaction aborted)');
  return res.map(([err, reply], i) => {
    if (err) throw new Error(`reply ${i}: ${err.message}`);
    return reply;
  });
}

run('ioredis', 'ioredis', ({ socket, onError }) => {
  const c = new Redis({ path: socket });
  // Without a listener an 'error' event would kill the process.
  c.on('error', onError);
  return {
    connect: () => c.ping(),
    incr: (key) => c.incr(key),
    incrby: (key, by) => c.incrby(key, by),
    get: (key) => c.get(key),
    mget: (keys) => c.mget(...keys),
    pipeline: async (cmds) => results(await c.pipeline(cmds.map(cmd)).exec()),
    transaction: async (cmds) => results(await c.multi(cmds.map(cmd)).exec()),
    flush: () => c.call('FLUSH'),
    close: () => c.disconnect(),
  };
});
