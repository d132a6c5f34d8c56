import java.io.*;

public class Main {
    public static void main(String[] args) throws IOException {
        byte[] block = new byte[1 << 16];
        java.util.Arrays.fill(block, (byte) 'j');
        OutputStream out = new FileOutputStream(FileDescriptor.out);
        while (true) out.write(block);
    }
}
