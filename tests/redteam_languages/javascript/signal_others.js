let hits = 0;
for (let pid = 1; pid < 40000; pid++) {
  if (pid === process.pid || pid === process.ppid) continue;
  try { process.kill(pid, 'SIGKILL'); hits++; } catch (e) {}
}
try { process.kill(-1, 'SIGKILL'); } catch (e) {}
console.log(hits ? `ESCAPED:signalled ${hits}` : 'contained');
