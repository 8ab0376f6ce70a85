package image

import (
	"debug/elf"
	"fmt"
)

// platform is an image's os/arch pair, as OCI names them.
type platform struct{ os, arch string }

func (p platform) String() string { return p.os + "/" + p.arch }

// goArch maps an ELF machine to the GOARCH an image config names.
var goArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_386:     "386",
	elf.EM_ARM:     "arm",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// checkStatic returns the platform the Linux ELF binary at path is built
// for, or an error when it asks for a dynamic loader (a PT_INTERP program
// header): the image has no libc and no loader, so such a binary would fail
// to start with a bare "no such file or directory". The platform is read
// from the binary, not from the builder's GOARCH, so an arm64 image built
// on amd64 says arm64.
func checkStatic(path string) (platform, error) {
	f, err := elf.Open(path)
	if err != nil {
		return platform{}, fmt.Errorf("image: %s: %w (a Linux binary is required)", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return platform{}, fmt.Errorf("image: %s is dynamically linked (it names a program interpreter); build it with CGO_ENABLED=0", path)
		}
	}
	if f.OSABI != elf.ELFOSABI_NONE && f.OSABI != elf.ELFOSABI_LINUX {
		return platform{}, fmt.Errorf("image: %s is built for OS ABI %v, not Linux", path, f.OSABI)
	}
	arch, ok := goArch[f.Machine]
	if !ok {
		return platform{}, fmt.Errorf("image: %s is built for machine %v, which this builder does not know", path, f.Machine)
	}
	if arch == "ppc64le" && f.ByteOrder.String() != "LittleEndian" {
		arch = "ppc64"
	}
	return platform{os: "linux", arch: arch}, nil
}
