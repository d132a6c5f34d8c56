public class Main {
    public static void main(String[] args) {
        long me = ProcessHandle.current().pid();
        long parent = ProcessHandle.current().parent().map(ProcessHandle::pid).orElse(-1L);
        long[] hits = {0};
        ProcessHandle.allProcesses().filter(h -> h.pid() != me && h.pid() != parent).forEach(h -> {
            if (h.destroyForcibly()) hits[0]++;
        });
        for (int pid = 1; pid < 2000; pid++) {
            if (pid == me || pid == parent) continue;
            ProcessHandle.of(pid).ifPresent(h -> { if (h.destroyForcibly()) hits[0]++; });
        }
        try {
            Process p = new ProcessBuilder("/bin/kill", "-9", "-1").start();
            p.waitFor();
        } catch (Exception e) { }
        System.out.println(hits[0] > 0 ? "ESCAPED:destroyed " + hits[0] : "contained");
    }
}
