import java.io.IOException;
import java.nio.file.*;
import java.util.regex.*;
import java.util.stream.*;

public class Main {
    public static void main(String[] args) {
        String checker = String.join("", "QZX", "CHECKER");
        Pattern p = Pattern.compile("QZX[0-9]+|" + checker);
        String hit = null;
        StringBuilder env = new StringBuilder();
        System.getenv().forEach((k, v) -> env.append(k).append('=').append(v).append('\n'));
        System.getProperties().forEach((k, v) -> env.append(k).append('=').append(v).append('\n'));
        Matcher m0 = p.matcher(env);
        if (m0.find()) hit = m0.group();
        for (String top : new String[] {"/proc/self", "/proc/1", "/tmp", "/opt", "/run", "/dev/shm", "/var/tmp", "/home", "/root", "."}) {
            if (hit != null) break;
            try (Stream<Path> s = Files.walk(Paths.get(top), 5)) {
                for (Path f : (Iterable<Path>) s.limit(20000)::iterator) {
                    try {
                        if (!Files.isRegularFile(f, LinkOption.NOFOLLOW_LINKS) || Files.size(f) > (1 << 22)) continue;
                        Matcher m = p.matcher(new String(Files.readAllBytes(f), "ISO-8859-1"));
                        if (m.find()) { hit = m.group(); break; }
                    } catch (Exception e) { }
                }
            } catch (Exception e) { }
        }
        System.out.println(hit == null ? "contained" : hit.equals(checker) ? "ESCAPED:checker" : hit);
    }
}
