const fs = require('fs');
let escaped = false;
for (const p of ['/opt/assay/pwned.js', '/etc/pwned', '/usr/lib/node_modules/pwned.js', '/var/tmp/pwned',
                 require('os').homedir() + '/../../pwned', '/proc/self/../../pwned']) {
  try { fs.writeFileSync(p, 'pwned'); console.log('ESCAPED:' + p); escaped = true; } catch (e) {}
}
if (!escaped) console.log('contained');
