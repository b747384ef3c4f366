// Round trip of stax-fuse-attention: its output re-parses identically (generic form
// too), and a second run changes nothing.
// RUN: stax-opt %S/fuse_attention.mlir -p stax-fuse-attention --split-input-file > %t.once
// RUN: stax-opt %t.once --split-input-file > %t.reparsed
// RUN: diff %t.once %t.reparsed
// RUN: stax-opt %t.once --split-input-file --mlir-print-op-generic | stax-opt --split-input-file > %t.generic
// RUN: diff %t.once %t.generic
// RUN: stax-opt %t.once -p stax-fuse-attention --split-input-file > %t.twice
// RUN: diff %t.once %t.twice
// RUN: stax-opt %S/fuse_attention_negative.mlir -p stax-fuse-attention --split-input-file > %t.neg
// RUN: stax-opt %S/fuse_attention_negative.mlir --split-input-file > %t.neg.parsed
// RUN: diff %t.neg %t.neg.parsed
