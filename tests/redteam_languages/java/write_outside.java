import java.io.*;

public class Main {
    public static void main(String[] args) {
        boolean escaped = false;
        String[] targets = {"/opt/assay/pwned", "/etc/pwned", "/usr/share/pwned", "/var/pwned", "/pwned",
                            System.getProperty("java.home") + "/lib/pwned", System.getProperty("user.home") + "/../pwned"};
        for (String t : targets) {
            try (FileWriter w = new FileWriter(t)) {
                w.write("pwned");
                System.out.println("ESCAPED:" + t);
                escaped = true;
            } catch (IOException e) { }
        }
        if (!escaped) System.out.println("contained");
    }
}
