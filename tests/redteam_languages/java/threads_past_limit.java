public class Main {
    public static void main(String[] args) {
        int made = 0;
        try {
            for (int i = 0; i < 5000; i++) {
                Thread t = new Thread(null, () -> {
                    try { Thread.sleep(Long.MAX_VALUE); } catch (InterruptedException e) { }
                }, "t" + i, 64 * 1024);
                t.setDaemon(true);
                t.start();
                made++;
            }
        } catch (Throwable e) {
            // OutOfMemoryError: unable to create native thread
        }
        System.out.println(made >= 512 ? "ESCAPED:threads=" + made : "contained threads=" + made);
        System.out.flush();
        Runtime.getRuntime().halt(0);
    }
}
