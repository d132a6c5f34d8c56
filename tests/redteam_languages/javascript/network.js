const net = require('net');
const dns = require('dns');
const targets = [['127.0.0.1', 54329], ['127.0.0.1', 8000], ['::1', 5432], ['1.1.1.1', 53], ['/var/run/docker.sock']];
let pending = targets.length + 1;
let escaped = false;
function done() { if (--pending === 0) { console.log(escaped ? 'ESCAPED:net' : 'contained'); process.exit(0); } }
for (const t of targets) {
  const s = t.length === 1 ? net.connect(t[0]) : net.connect(t[1], t[0]);
  s.setTimeout(500);
  s.on('connect', () => { escaped = true; s.destroy(); done(); });
  s.on('error', () => done());
  s.on('timeout', () => { s.destroy(); done(); });
}
dns.lookup('example.com', (err) => { if (!err) escaped = true; done(); });
