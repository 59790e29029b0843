// Java threads that turn faults into exceptions, as the JVM does with signal handlers:
// each of 16 threads catches 1,000 NullPointerExceptions (implicit null checks: a SIGSEGV
// the JVM's handler turns into the exception) and one StackOverflowError (a stack bang into
// the JVM's guard zone: a SIGSEGV whose handler takes locks). Under schedlab exec a handler
// may wait and end on another kernel thread: its mask and its alternate stack must follow
// (docs/PTHREAD.md, "A program's signal handlers run through the library").
public class Faults {
    static int depth(int n) { return depth(n + 1) + 1; }
    static volatile Object nothing = null;

    public static void main(String[] args) throws Exception {
        int n = 16;
        Thread[] threads = new Thread[n];
        int[] ok = new int[n];
        for (int i = 0; i < n; i++) {
            final int k = i;
            threads[i] = new Thread(() -> {
                int caught = 0;
                for (int j = 0; j < 1000; j++) {
                    try {
                        nothing.hashCode();
                    } catch (NullPointerException e) {
                        caught++;
                    }
                }
                boolean overflowed = false;
                try {
                    depth(0);
                } catch (StackOverflowError e) {
                    overflowed = true;
                }
                if (caught == 1000 && overflowed) ok[k] = 1;
            });
            threads[i].start();
        }
        for (Thread t : threads) t.join();
        int sum = 0;
        for (int x : ok) sum += x;
        if (sum != n) throw new RuntimeException(sum + " of " + n + " threads caught every fault");
        System.out.println("ok");
    }
}
