const { Worker } = require('worker_threads');
let made = 0;
try {
  for (let i = 0; i < 3000; i++) {
    new Worker('setInterval(() => {}, 1000)', { eval: true, resourceLimits: { maxOldGenerationSizeMb: 8 } });
    made++;
  }
} catch (e) {}
setTimeout(() => {
  console.log(made >= 512 ? `ESCAPED:threads=${made}` : `contained threads=${made}`);
  process.exit(0);
}, 300);
