import java.util.Scanner;

public class Main {
    public static void main(String[] args) {
        long n = new Scanner(System.in).nextLong();
        System.out.println("QZX" + (n * 31337 + 4242) % 1000003);
    }
}
