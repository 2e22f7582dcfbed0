//! gcc 12 on MIPS emits the NOPs of `-fpatchable-function-entry` before
//! the function's label, where no caller runs them (the 001 seed's series
//! needed a gcc fix for this). To test the seed's design on what the
//! compiler generates otherwise, the test builds the code to assembly and
//! moves each label above its NOPs — what the unmerged gcc fix does.

/// `text` with every `NAME:` label that follows a `$LPFEn:` (o32) or
/// `.LPFEn:` (n64) label, with only NOPs and directives between, moved to
/// just before it.
pub fn move_labels_above_nops(text: &str) -> String {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = Vec::with_capacity(lines.len());
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        // o32 names local labels `$LPFEn`, n64 `.LPFEn`.
        if (line.starts_with("$LPFE") || line.starts_with(".LPFE")) && line.ends_with(':') {
            // Find the function's label after the NOPs and directives.
            let mut j = i + 1;
            while j < lines.len() {
                let t = lines[j].trim();
                if t == "nop" || t.starts_with('.') {
                    j += 1;
                    continue;
                }
                break;
            }
            if j < lines.len() && is_label(lines[j]) {
                out.push(lines[j].to_string());
                out.push(line.to_string());
                out.extend(lines[i + 1..j].iter().map(|s| s.to_string()));
                i = j + 1;
                continue;
            }
        }
        out.push(line.to_string());
        i += 1;
    }
    out.join("\n") + "\n"
}

fn is_label(line: &str) -> bool {
    line.ends_with(':') && !line.starts_with('$') && !line.starts_with(' ') && !line.starts_with('\t')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn moves_the_label_above_the_nops() {
        let asm =
            "\t.text\n$LPFE1:\n\t.set\tnoreorder\n\tnop\n\t.set\treorder\n\t.ent\tleaf\nleaf:\n\tjr\t$31\n";
        let fixed = move_labels_above_nops(asm);
        assert_eq!(
            fixed,
            "\t.text\nleaf:\n$LPFE1:\n\t.set\tnoreorder\n\tnop\n\t.set\treorder\n\t.ent\tleaf\n\tjr\t$31\n"
        );
    }

    #[test]
    fn n64_labels_too() {
        let asm = ".LPFE1:\n\tnop\n\t.ent\tleaf\nleaf:\n";
        assert_eq!(
            move_labels_above_nops(asm),
            "leaf:\n.LPFE1:\n\tnop\n\t.ent\tleaf\n"
        );
    }

    #[test]
    fn leaves_other_code_alone() {
        let asm = "leaf:\n\tjr\t$31\n";
        assert_eq!(move_labels_above_nops(asm), asm);
    }
}
