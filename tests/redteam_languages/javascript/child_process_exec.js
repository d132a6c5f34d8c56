// child_process: a shell, then the usual escape hatches; and process.binding, Node's
// raw access to its own C++ bindings.
const cp = require('child_process');
let escaped = false;
const run = (cmd) => { try { return cp.execSync(cmd, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }); } catch (e) { return ''; } };
if (run('id -u').trim() === '0') { console.log('ESCAPED:root'); escaped = true; }
if (run('cat /etc/shadow').includes(':')) { console.log('ESCAPED:shadow'); escaped = true; }
if (run('(echo > /dev/tcp/127.0.0.1/54329) 2>/dev/null && echo ok').includes('ok')) { console.log('ESCAPED:tcp'); escaped = true; }
try {
  const spawnSync = process.binding('spawn_sync');
  const r = spawnSync.spawn({ file: '/bin/sh', args: ['sh', '-c', 'cat /etc/shadow'], stdio: [{ type: 'pipe', readable: true }, { type: 'pipe', writable: true }, { type: 'pipe', writable: true }], envPairs: [] });
  if (r && r.output && String(r.output[1]).includes(':')) { console.log('ESCAPED:binding'); escaped = true; }
} catch (e) {}
if (!escaped) console.log('contained');
