module weftbench/peers/go

go 1.21
