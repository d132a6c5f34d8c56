// Nested finally blocks: javac copies each finally body into every exit path, so the
// bytecode doubles with each level (a decompression bomb for the compiler).
public class Main {
    static int x;
    public static void main(String[] args) {
        try { x++; } finally { try { x++; } finally { try { x++; } finally { try { x++; } finally {
        try { x++; } finally { try { x++; } finally { try { x++; } finally { try { x++; } finally {
        try { x++; } finally { try { x++; } finally { try { x++; } finally { try { x++; } finally {
        try { x++; } finally { try { x++; } finally { try { x++; } finally { try { x++; } finally {
        try { x++; } finally { try { x++; } finally { try { x++; } finally { try { x++; } finally {
        try { x++; } finally { try { x++; } finally { try { x++; } finally { try { x++; } finally {
        x++;
        } } } } } } } } } } } } } } } } } } } } } } } }
        System.out.println("QZX" + x);
    }
}
