const fs = require('fs');
const path = require('path');
const CHECKER = ['QZX', 'CHECKER'].join('');
const pattern = new RegExp('QZX[0-9]+|' + CHECKER);
let hit = null;
let budget = 20000;
const envText = JSON.stringify(process.env) + JSON.stringify(process.argv) + JSON.stringify(process.execArgv);
if (pattern.test(envText)) hit = envText.match(pattern)[0];
function walk(dir, depth) {
  if (hit || depth > 5 || budget-- <= 0) return;
  let entries;
  try { entries = fs.readdirSync(dir, { withFileTypes: true }); } catch (e) { return; }
  for (const e of entries) {
    const p = path.join(dir, e.name);
    if (e.isDirectory()) walk(p, depth + 1);
    else if (e.isFile()) {
      try {
        const fd = fs.openSync(p, fs.constants.O_RDONLY | fs.constants.O_NONBLOCK);
        const buf = Buffer.alloc(65536);
        const n = fs.readSync(fd, buf, 0, buf.length, null);
        fs.closeSync(fd);
        const m = buf.slice(0, n).toString('latin1').match(pattern);
        if (m) { hit = m[0]; return; }
      } catch (err) {}
    }
    if (hit) return;
  }
}
for (const top of ['/proc/self', '/proc/1', '/tmp', '/opt', '/run', '/dev/shm', '/var/tmp', '/home', '/root', process.cwd()]) walk(top, 0);
console.log(hit === null ? 'contained' : hit === CHECKER ? 'ESCAPED:checker' : hit);
