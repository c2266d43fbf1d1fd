package main

import "io"

func cmdBench(args []string, out, errOut io.Writer) error { return usageErr("bench: not yet") }
