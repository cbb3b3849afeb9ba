package main

func genTSTypes(c *contract) ([]byte, error)  { return nil, nil }
func genTSErrors(c *contract) ([]byte, error) { return nil, nil }
func genPyTypes(c *contract) ([]byte, error)  { return nil, nil }
func genPyErrors(c *contract) ([]byte, error) { return nil, nil }
