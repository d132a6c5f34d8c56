const chunk = 'n'.repeat(1 << 16);
const fs = require('fs');
for (;;) fs.writeSync(1, chunk);
