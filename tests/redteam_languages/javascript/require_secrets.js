// Load-time attack: require() of files outside the program (a syntax error would quote them).
let escaped = false;
for (const p of ['/etc/shadow', '/proc/1/environ', '/root/.ssh/id_rsa']) {
  try { require(p); console.log('ESCAPED:' + p); escaped = true; } catch (e) {
    if (!/EACCES|ENOENT|Cannot find module|EPERM/.test(String(e))) { console.log('ESCAPED:read ' + p); escaped = true; }
  }
}
if (!escaped) console.log('contained');
