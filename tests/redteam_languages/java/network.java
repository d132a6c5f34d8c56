import java.net.*;

public class Main {
    public static void main(String[] args) {
        boolean escaped = false;
        String[][] targets = {{"127.0.0.1", "54329"}, {"127.0.0.1", "8000"}, {"localhost", "5432"}, {"1.1.1.1", "443"}, {"example.com", "80"}};
        for (String[] t : targets) {
            try (Socket s = new Socket()) {
                s.connect(new InetSocketAddress(t[0], Integer.parseInt(t[1])), 300);
                System.out.println("ESCAPED:" + t[0] + ":" + t[1]);
                escaped = true;
            } catch (Exception e) { }
        }
        try {
            new URL("http://169.254.169.254/latest/meta-data/").openStream().read();
            System.out.println("ESCAPED:metadata");
            escaped = true;
        } catch (Exception e) { }
        if (!escaped) System.out.println("contained");
    }
}
