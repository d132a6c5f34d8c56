public class Main {
    public static void main(String[] args) {
        long me = ProcessHandle.current().pid();
        long[] hits = {0};
        ProcessHandle.allProcesses().filter(h -> h.pid() != me).forEach(h -> {
            if (h.destroyForcibly()) hits[0]++;
        });
        for (int pid = 1; pid < 2000; pid++) {
            if (pid == me) continue;
            ProcessHandle.of(pid).ifPresent(h -> { if (h.destroyForcibly()) hits[0]++; });
        }
        try {
            Process p = new ProcessBuilder("/bin/kill", "-9", "-1").start();
            p.waitFor();
        } catch (Exception e) { }
        System.out.println(hits[0] > 0 ? "ESCAPED:destroyed " + hits[0] : "contained");
    }
}
