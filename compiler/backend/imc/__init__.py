"""Pass `imc`: the IMC mapper (`mapper`) and every mapping the program uses, decided once
(`plan`)."""
