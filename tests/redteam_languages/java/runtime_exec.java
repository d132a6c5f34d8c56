import java.io.*;

public class Main {
    public static void main(String[] args) throws Exception {
        // Runtime.exec: a shell, then whatever it can reach.
        String[] cmds = {"id -u", "cat /etc/shadow | head -c 30", "ls /opt/assay /run /var/run 2>&1 | head -c 200",
                         "(echo > /dev/tcp/127.0.0.1/54329) 2>&1 && echo TCP-OK"};
        boolean escaped = false;
        for (String c : cmds) {
            try {
                Process p = Runtime.getRuntime().exec(new String[] {"/bin/bash", "-c", c});
                String out = new String(p.getInputStream().readAllBytes()).trim();
                p.waitFor();
                if (c.startsWith("id") && out.equals("0")) { System.out.println("ESCAPED:root"); escaped = true; }
                if (c.startsWith("cat") && out.contains(":")) { System.out.println("ESCAPED:shadow"); escaped = true; }
                if (out.contains("TCP-OK")) { System.out.println("ESCAPED:tcp"); escaped = true; }
            } catch (IOException e) { }
        }
        if (!escaped) System.out.println("contained");
    }
}
