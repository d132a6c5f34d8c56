import java.io.*;
import java.nio.file.*;

// JNI: write a C library, build it with the compiler the sandbox may have, System.load it,
// and call raw syscalls from native code.
public class Main {
    static native int poke();

    public static void main(String[] args) throws Exception {
        String c = "#include <jni.h>\n#include <unistd.h>\n#include <sys/syscall.h>\n"
                 + "JNIEXPORT jint JNICALL Java_Main_poke(JNIEnv *e, jclass k) {\n"
                 + "  if (syscall(SYS_setuid, 0) == 0 && getuid() == 0) return 1;\n"
                 + "  if (syscall(SYS_ptrace, 16, 1, 0, 0) == 0) return 2;\n"
                 + "  return 0; }\n";
        Path dir = Files.createTempDirectory("jni");
        Files.writeString(dir.resolve("p.c"), c);
        String home = System.getProperty("java.home");
        Process p = new ProcessBuilder("gcc", "-shared", "-fPIC", "-I" + home + "/include", "-I" + home + "/include/linux",
                                       "-o", dir.resolve("libp.so").toString(), dir.resolve("p.c").toString())
                        .redirectErrorStream(true).start();
        p.getInputStream().readAllBytes();
        p.waitFor();
        int r = 0;
        try {
            System.load(dir.resolve("libp.so").toString());
            r = poke();
        } catch (Throwable t) { }
        System.out.println(r != 0 ? "ESCAPED:jni " + r : "contained");
    }
}
