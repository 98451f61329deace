//! KVM VM-exit accounting from the kvm tracepoints (tracefs format parsing, raw record decoding, VMX/SVM/TDX exit-reason tables).
