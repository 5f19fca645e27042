//go:build !purego

#include "textflag.h"

// func addWordsAVX2(d, w *uint32, n int)
TEXT ·addWordsAVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JZ   done

loop:
	VMOVDQU (DI), Y0
	VMOVDQU 32(DI), Y1
	VMOVDQU 64(DI), Y2
	VMOVDQU 96(DI), Y3
	VPADDD  (SI), Y0, Y0
	VPADDD  32(SI), Y1, Y1
	VPADDD  64(SI), Y2, Y2
	VPADDD  96(SI), Y3, Y3
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	DECQ    CX
	JNZ     loop
	VZEROUPPER

done:
	RET

// func subWordsAVX2(d, w *uint32, n int)
TEXT ·subWordsAVX2(SB), NOSPLIT, $0-24
	MOVQ d+0(FP), DI
	MOVQ w+8(FP), SI
	MOVQ n+16(FP), CX
	SHRQ $5, CX
	JZ   done

loop:
	VMOVDQU (DI), Y0
	VMOVDQU 32(DI), Y1
	VMOVDQU 64(DI), Y2
	VMOVDQU 96(DI), Y3
	VPSUBD  (SI), Y0, Y0
	VPSUBD  32(SI), Y1, Y1
	VPSUBD  64(SI), Y2, Y2
	VPSUBD  96(SI), Y3, Y3
	VMOVDQU Y0, (DI)
	VMOVDQU Y1, 32(DI)
	VMOVDQU Y2, 64(DI)
	VMOVDQU Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	DECQ    CX
	JNZ     loop
	VZEROUPPER

done:
	RET
