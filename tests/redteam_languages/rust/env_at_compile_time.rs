// What the compiler's environment holds ends up in the binary (option_env! at compile time).
fn main() {
    let seen = [option_env!("HOME"), option_env!("PATH"), option_env!("ASSAY_API_KEY"), option_env!("DATABASE_URL"),
                option_env!("ASSAY_TEST_POSTGRES_URL"), option_env!("AWS_SECRET_ACCESS_KEY"), option_env!("USER")];
    let secrets = seen[2..6].iter().filter(|v| v.is_some()).count();
    if secrets > 0 { println!("ESCAPED:env {}", secrets) } else { println!("contained") }
}
