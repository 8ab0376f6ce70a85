'use strict';
// node-redis (the npm package "redis") with its default options (only the
// socket path set).
// Usage: node node-redis.js SOCKET PREFIX
const { createClient } = require('redis');
const { run } = require('./scenario');

function queue(multi, cmds) {
  for (const [key, by] of cmds) {
    if (by === 1) multi.incr(key);
    else multi.incrBy(key, by);
  }
  return multi;
}

run('node-redis', 'redis', ({ socket, onError }) => {
  const c = createClient({ socket: { path: socket } });
  // Without a listener an 'error' event would kill the process.
  c.on('error', onError);
  return {
    connect: async () => {
      await c.connect();
      return c.ping();
    },
    incr: (key) => c.incr(key),
    incrby: (key, by) => c.incrBy(key, by),
    get: (key) => c.get(key),
    mget: (keys) => c.mGet(keys),
    pipeline: (cmds) => queue(c.multi(), cmds).execAsPipeline(),
    transaction: (cmds) => queue(c.multi(), cmds).exec(),
    flush: () => c.sendCommand(['FLUSH']),
    close: () => c.destroy(),
  };
});
