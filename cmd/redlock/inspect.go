package main

import "io"

func cmdInspect(args []string, out io.Writer) error { return usageErr("inspect: not yet") }
func cmdUnlock(args []string, out io.Writer) error  { return usageErr("unlock: not yet") }
