const data = require('fs').readFileSync(0, 'utf8').trim();
const n = BigInt(data);
console.log('QZX' + ((n * 31337n + 4242n) % 1000003n).toString());
