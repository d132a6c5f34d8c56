#include <fstream>
#include <iostream>
#include <string>
int main() {
    bool escaped = false;
    for (std::string p : {"/opt/assay/sandboxes/pwned", "/etc/ld.so.preload", "/usr/lib/pwned.so", "/var/pwned",
                          "/tmp/work/../../pwned", "/dev/pwned", "/root/.bashrc"}) {
        std::ofstream out(p, std::ios::app);
        if (out && (out << "pwned\n")) { out.close(); if (out) { std::cout << "ESCAPED:" << p << '\n'; escaped = true; } }
    }
    if (!escaped) std::cout << "contained\n";
}
